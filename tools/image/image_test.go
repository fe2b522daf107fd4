package main

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// buildMeshd builds a static meshd stamped with a test version, as the
// Makefile's image target does.
func buildMeshd(t *testing.T, dir string) string {
	t.Helper()
	return buildMeshdFor(t, dir, "")
}

// buildMeshdFor builds it for GOARCH arch ("" for this machine's) into dir.
func buildMeshdFor(t *testing.T, dir, arch string) string {
	t.Helper()
	bin := filepath.Join(dir, "meshd")
	if arch != "" {
		bin = filepath.Join(dir, "meshd-"+arch)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=v0.0.0-imagetest -X main.commit=0123abc",
		"-o", bin, "./cmd/meshd")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if arch != "" {
		cmd.Env = append(cmd.Env, "GOARCH="+arch)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The image, written as a tarball and read back, is a non-root image whose
// entrypoint is "meshd run"; unpacked, its binary runs and reports the
// stamped version.
func TestImageRunsMeshd(t *testing.T) {
	dir := t.TempDir()
	bin := buildMeshd(t, dir)
	img, err := Build(Options{Binary: bin, Tag: "meshd:test", Arch: "amd64", Version: "v0.0.0-imagetest", Revision: "0123abc"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "image.tar")
	if err := WriteTarball(img, "meshd:test", path); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("meshd:test")
	loaded, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := loaded.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/meshd", "run"}) ||
		cf.OS != "linux" || cf.Config.Labels["org.opencontainers.image.version"] != "v0.0.0-imagetest" {
		t.Fatalf("config: user %q, entrypoint %q, os %q, labels %v", cf.Config.User, cf.Config.Entrypoint, cf.OS, cf.Config.Labels)
	}

	root := filepath.Join(dir, "rootfs")
	modes := unpack(t, loaded, root)
	if modes["usr/local/bin/meshd"] != 0o755 || modes["tmp"]&0o1777 != 0o1777 || modes["home/nonroot"] != 0o700 {
		t.Errorf("modes: %v", modes)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd: %q, %v", passwd, err)
	}

	entry := filepath.Join(root, cf.Config.Entrypoint[0])
	out, err := exec.Command(entry, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "meshd v0.0.0-imagetest\n") || !strings.Contains(string(out), "commit:   0123abc") {
		t.Fatalf("meshd version from the image: %v\n%s", err, out)
	}
	// The entrypoint as a container runtime would call it, with flags.
	args := append(slices.Clone(cf.Config.Entrypoint[1:]), "--help")
	out, err = exec.Command(entry, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Run the daemon") {
		t.Fatalf("%s %v: %v\n%s", entry, args, err, out)
	}
	t.Logf("image %s: %d entries; ran %s from it", must(loaded.Digest()), len(modes), entry)
}

func TestImageLayout(t *testing.T) {
	dir := t.TempDir()
	img, err := Build(Options{Binary: buildMeshd(t, dir), Tag: "meshd:test", Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "oci")
	if err := WriteLayout(img, out); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index: %+v, %v", m, err)
	}
	if want := must(img.Digest()); m.Manifests[0].Digest != want {
		t.Fatalf("layout holds %v, want %v", m.Manifests[0].Digest, want)
	}
	// The same binary gives the same image.
	again, err := Build(Options{Binary: filepath.Join(dir, "meshd"), Tag: "meshd:test", Arch: "amd64"})
	if err != nil || must(again.Digest()) != must(img.Digest()) {
		t.Fatalf("rebuilt image differs: %v", err)
	}
}

func TestBuildRejectsWhatCannotRun(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ binary, want string }{
		{"", "no binary given"},
		{filepath.Join(dir, "missing"), "no such file"},
		{text, "not an ELF executable"},
		{"/bin/sh", "dynamically linked"},
	} {
		if _, err := Build(Options{Binary: tc.binary}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build(%q): %v, want %q", tc.binary, err, tc.want)
		}
	}
}

// unpack writes the image's flattened filesystem under root and returns
// each entry's permission bits by name.
func unpack(t *testing.T, img v1.Image, root string) map[string]int64 {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	modes := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return modes
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[h.Name] = h.Mode
		target := filepath.Join(root, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("unexpected entry %s of type %c", h.Name, h.Typeflag)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// One build, two architectures: the layout holds an index of an amd64 and
// an arm64 image, each manifest naming its platform and each image holding
// the binary of its architecture; a binary of one architecture is never
// labelled as another.
func TestMultiArchitectureIndex(t *testing.T) {
	dir := t.TempDir()
	bins := map[string]string{"amd64": buildMeshdFor(t, dir, "amd64"), "arm64": buildMeshdFor(t, dir, "arm64")}
	idx, images, err := BuildIndex(Options{Tag: "meshd:test", Version: "v0.0.0-imagetest"}, []string{"amd64", "arm64"}, bins)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "oci")
	if err := WriteIndexLayout(idx, out); err != nil {
		t.Fatal(err)
	}
	root, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := root.IndexManifest()
	if err != nil || len(top.Manifests) != 1 {
		t.Fatalf("layout: %+v, %v; want one entry, the index", top, err)
	}
	read, err := root.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := read.IndexManifest()
	if err != nil || len(m.Manifests) != 2 {
		t.Fatalf("index: %+v, %v", m, err)
	}
	for i, arch := range []string{"amd64", "arm64"} {
		d := m.Manifests[i]
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != arch {
			t.Errorf("manifest %d: platform %+v, want linux/%s", i, d.Platform, arch)
		}
		img, err := read.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if cf := must(img.ConfigFile()); cf.Architecture != arch || cf.OS != "linux" {
			t.Errorf("%s image config: %s/%s", arch, cf.OS, cf.Architecture)
		}
		if must(img.Digest()) != must(images[arch].Digest()) {
			t.Errorf("%s: the layout's image is not the one built", arch)
		}
		files := unpack(t, img, filepath.Join(dir, "root-"+arch))
		if _, ok := files["usr/local/bin/meshd"]; !ok {
			t.Fatalf("%s image has no meshd: %v", arch, files)
		}
		f, err := elf.Open(filepath.Join(dir, "root-"+arch, "usr", "local", "bin", "meshd"))
		if err != nil {
			t.Fatal(err)
		}
		if want := elfMachines[arch]; f.Machine != want {
			t.Errorf("%s image holds a %v binary", arch, f.Machine)
		}
		f.Close()
	}

	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Binary: bins["arm64"], Arch: "amd64"}, "built for EM_AARCH64, not amd64"},
		{Options{Binary: bins["amd64"], Arch: "arm64"}, "built for EM_X86_64, not arm64"},
		{Options{Binary: bins["amd64"], Arch: "s390x"}, `architecture "s390x": want one of amd64, arm64`},
	} {
		if _, err := Build(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build(%s as %s): %v, want %q", filepath.Base(tc.o.Binary), tc.o.Arch, err, tc.want)
		}
	}
	if _, _, err := BuildIndex(Options{}, []string{"amd64", "arm64"}, map[string]string{"amd64": bins["amd64"]}); err == nil ||
		!strings.Contains(err.Error(), "no binary for arm64") {
		t.Errorf("BuildIndex without an arm64 binary: %v", err)
	}
}

func TestParseBinaries(t *testing.T) {
	archs, bins, err := parseBinaries("amd64=/a, arm64=/b")
	if err != nil || !slices.Equal(archs, []string{"amd64", "arm64"}) || bins["amd64"] != "/a" || bins["arm64"] != "/b" {
		t.Fatalf("parseBinaries: %v %v %v", archs, bins, err)
	}
	for _, bad := range []string{"", "amd64", "=x", "amd64=", "amd64=/a,amd64=/b"} {
		if _, _, err := parseBinaries(bad); err == nil {
			t.Errorf("parseBinaries(%q) accepted", bad)
		}
	}
}
