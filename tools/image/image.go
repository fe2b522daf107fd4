package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Facts of the image.
const (
	// BinaryPath is where meshd lives in the image.
	BinaryPath = "/usr/local/bin/meshd"
	// UID and GID of the user meshd runs as: not root, the "nonroot" user
	// of distroless images, which the chart's securityContext names too.
	UID = 65532
	GID = 65532
)

// Entrypoint is the image's entrypoint: arguments given to the container
// are flags of "meshd run".
var Entrypoint = []string{BinaryPath, "run"}

// Options describe the image to build.
type Options struct {
	// Binary is the path of a static linux meshd binary. Required.
	Binary string
	// Tag names the image in a tarball, e.g. "meshd:dev".
	Tag string
	// Arch is the binary's GOARCH.
	Arch string
	// Version and Revision become the OCI version and revision labels.
	Version, Revision string
}

// epoch is the creation time of every file and of the image, so that the
// same binary always gives the same image digest.
var epoch = time.Unix(0, 0).UTC()

// Build returns the image. It checks that the binary is a statically linked
// linux executable, since the image has no C library or loader.
func Build(o Options) (v1.Image, error) {
	if o.Binary == "" {
		return nil, errors.New("no binary given")
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	if err := checkStatic(bin); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Binary, err)
	}
	if err := checkArch(bin, o.Arch); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Binary, err)
	}
	files, err := rootFS(bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", o.Arch, v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: Entrypoint,
		User:       fmt.Sprintf("%d:%d", UID, GID),
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin"},
		ExposedPorts: map[string]struct{}{
			"15014/tcp": {},
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "meshd",
			"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.version":  o.Version,
			"org.opencontainers.image.revision": o.Revision,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// checkStatic returns an error unless bin is a linux ELF executable with no
// program interpreter (no dynamic loader needed).
func checkStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked; build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// elfMachines maps the architectures the image is built for to the ELF
// machine of their binaries.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// checkArch returns an error unless bin is built for arch (when arch is
// given): an image labelled amd64 holding an arm64 binary would be pulled
// by the wrong nodes and fail there with "exec format error".
func checkArch(bin []byte, arch string) error {
	if arch == "" {
		return nil
	}
	want, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("architecture %q: want one of amd64, arm64", arch)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("built for %v, not %s", f.Machine, arch)
	}
	return nil
}

// BuildIndex builds one image per architecture, each from its binary
// (arch -> path, every other Options field shared), and returns them as a
// multi-architecture image index in the order of archs, each manifest
// carrying its platform.
func BuildIndex(o Options, archs []string, binaries map[string]string) (v1.ImageIndex, map[string]v1.Image, error) {
	if len(archs) == 0 {
		return nil, nil, errors.New("no architectures given")
	}
	idx := v1.ImageIndex(empty.Index)
	idx = mutate.IndexMediaType(idx, "application/vnd.oci.image.index.v1+json")
	images := map[string]v1.Image{}
	for _, arch := range archs {
		if _, dup := images[arch]; dup {
			return nil, nil, fmt.Errorf("architecture %s given twice", arch)
		}
		po := o
		po.Arch, po.Binary = arch, binaries[arch]
		if po.Binary == "" {
			return nil, nil, fmt.Errorf("no binary for %s", arch)
		}
		img, err := Build(po)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", arch, err)
		}
		images[arch] = img
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx, images, nil
}

// WriteIndexLayout writes idx as an OCI image layout into dir, replacing it:
// one entry, the index, which registries and "crane push" take as a
// multi-architecture image.
func WriteIndexLayout(idx v1.ImageIndex, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx)
}

// rootFS is the layer: the directories, /etc/passwd and /etc/group naming
// the non-root user (so tools show a name, and $HOME exists), /tmp, and the
// binary.
func rootFS(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, body []byte) error {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	steps := []func() error{
		func() error { return dir("etc/", 0o755) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("home/", 0o755) },
		func() error {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "home/nonroot/", Mode: 0o700, Uid: UID, Gid: GID,
				ModTime: epoch, Format: tar.FormatPAX})
		},
		func() error { return dir("tmp/", 0o1777) },
		func() error { return dir("usr/", 0o755) },
		func() error { return dir("usr/local/", 0o755) },
		func() error { return dir("usr/local/bin/", 0o755) },
		func() error { return file(BinaryPath[1:], 0o755, bin) },
		tw.Close,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
	}
	return buf.Bytes(), nil
}

// WriteTarball writes img, named tag, as a tarball to path.
func WriteTarball(img v1.Image, tag, path string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	return tarball.WriteToFile(path, ref, img)
}

// WriteLayout writes img as an OCI image layout into dir, replacing it.
func WriteLayout(img v1.Image, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img)
}
