// Command image builds meshd's container image without a container daemon:
// one layer holding the static meshd binary, run as a non-root user, with
// the entrypoint "meshd run". It writes a tarball that "docker load",
// "podman load" and crane read, and optionally an OCI image layout.
//
//	go run . -binary ../../bin/linux_amd64/meshd -tag meshd:dev -o ../../bin/meshd-image.tar -layout ../../bin/meshd-oci
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

func main() {
	var o Options
	flag.StringVar(&o.Binary, "binary", "", "the static meshd binary (linux) to put in the image; required")
	flag.StringVar(&o.Tag, "tag", "meshd:dev", "image reference written into the tarball")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "architecture of the binary")
	flag.StringVar(&o.Version, "version", "", "version label (org.opencontainers.image.version)")
	flag.StringVar(&o.Revision, "revision", "", "commit label (org.opencontainers.image.revision)")
	out := flag.String("o", "", "write the image as a tarball to this file")
	layoutDir := flag.String("layout", "", "also write the image as an OCI image layout into this directory")
	flag.Parse()
	if err := run(o, *out, *layoutDir); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o Options, out, layoutDir string) error {
	if out == "" && layoutDir == "" {
		return fmt.Errorf("nothing to write: give -o, -layout or both")
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
