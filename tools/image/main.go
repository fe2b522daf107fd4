// Command image builds meshd's container image without a container daemon:
// one layer holding the static meshd binary, run as a non-root user, with
// the entrypoint "meshd run". It writes a tarball that "docker load",
// "podman load" and crane read, and optionally an OCI image layout. With
// -binaries it builds one image per architecture from the same sources: the
// layout then holds a multi-architecture index, and the tarball (which
// "docker load" reads one platform of) the image of -arch.
//
//	go run . -binary ../../bin/linux_amd64/meshd -tag meshd:dev -o ../../bin/meshd-image.tar -layout ../../bin/meshd-oci
//	go run . -binaries amd64=../../bin/linux_amd64/meshd,arm64=../../bin/linux_arm64/meshd -arch amd64 ...
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	var o Options
	flag.StringVar(&o.Binary, "binary", "", "the static meshd binary (linux) to put in the image; required unless -binaries")
	binaries := flag.String("binaries", "", "arch=binary,... : one image per architecture, as an index in the layout")
	flag.StringVar(&o.Tag, "tag", "meshd:dev", "image reference written into the tarball")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "architecture of the binary")
	flag.StringVar(&o.Version, "version", "", "version label (org.opencontainers.image.version)")
	flag.StringVar(&o.Revision, "revision", "", "commit label (org.opencontainers.image.revision)")
	out := flag.String("o", "", "write the image as a tarball to this file")
	layoutDir := flag.String("layout", "", "also write the image as an OCI image layout into this directory")
	flag.Parse()
	if err := run(o, *binaries, *out, *layoutDir); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// parseBinaries parses "amd64=path,arm64=path" into the architectures in
// order and their binaries.
func parseBinaries(s string) ([]string, map[string]string, error) {
	var archs []string
	bins := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		arch, path, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || arch == "" || path == "" {
			return nil, nil, fmt.Errorf("-binaries %q: want arch=path,arch=path", s)
		}
		if _, dup := bins[arch]; dup {
			return nil, nil, fmt.Errorf("-binaries %q: %s given twice", s, arch)
		}
		archs = append(archs, arch)
		bins[arch] = path
	}
	return archs, bins, nil
}

func run(o Options, binaries, out, layoutDir string) error {
	if out == "" && layoutDir == "" {
		return fmt.Errorf("nothing to write: give -o, -layout or both")
	}
	var img v1.Image
	if binaries != "" {
		if o.Binary != "" {
			return fmt.Errorf("give -binary or -binaries, not both")
		}
		archs, bins, err := parseBinaries(binaries)
		if err != nil {
			return err
		}
		idx, images, err := BuildIndex(o, archs, bins)
		if err != nil {
			return err
		}
		if img = images[o.Arch]; img == nil && out != "" {
			return fmt.Errorf("-arch %s: not among -binaries %s (the tarball holds that one)", o.Arch, binaries)
		}
		if layoutDir != "" {
			if err := WriteIndexLayout(idx, layoutDir); err != nil {
				return err
			}
			fmt.Println("wrote", layoutDir, "("+strings.Join(archs, ", ")+")")
		}
		if out != "" {
			if err := WriteTarball(img, o.Tag, out); err != nil {
				return err
			}
			fmt.Println("wrote", out, "("+o.Arch+")")
		}
		return nil
	}
	img, err := Build(o)
	if err != nil {
		return err
	}
	if out != "" {
		if err := WriteTarball(img, o.Tag, out); err != nil {
			return err
		}
		fmt.Println("wrote", out)
	}
	if layoutDir != "" {
		if err := WriteLayout(img, layoutDir); err != nil {
			return err
		}
		fmt.Println("wrote", layoutDir)
	}
	return nil
}
