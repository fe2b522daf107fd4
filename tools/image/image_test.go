package main

import (
	"archive/tar"
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
	bin := filepath.Join(dir, "meshd")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=v0.0.0-imagetest -X main.commit=0123abc",
		"-o", bin, "./cmd/meshd")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
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
