package testcluster

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestNamespaceName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, name := range []string{
		"TestFoo",
		"TestFoo/sub_test#01",
		"___",
		strings.Repeat("TestVeryLongName/", 20),
	} {
		got := namespaceName(name)
		if len(got) > 63 || !valid.MatchString(got) || !strings.HasPrefix(got, "t-") {
			t.Errorf("namespaceName(%q) = %q is not a valid namespace name", name, got)
		}
	}
	if a, b := namespaceName("TestX"), namespaceName("TestX"); a == b {
		t.Errorf("namespaceName is not unique: %q twice", a)
	}
	if got := namespaceName("TestFoo/Bar"); !strings.HasPrefix(got, "t-testfoo-bar-") {
		t.Errorf("namespaceName(TestFoo/Bar) = %q, want prefix t-testfoo-bar-", got)
	}
}

func TestRepoRootAndBinDir(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// A nested module with a longer path must not be mistaken for the root.
	if err := os.WriteFile(filepath.Join(dir, "a", "go.mod"), []byte("module github.com/meshd-io/meshd/tools/kube\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("// comment\nmodule github.com/meshd-io/meshd // root\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := RepoRoot(sub)
	if err != nil || got != dir {
		t.Fatalf("RepoRoot = %q, %v; want %q", got, err, dir)
	}

	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := findBinDir(bin); err == nil || !strings.Contains(err.Error(), "make kube-bins") {
		t.Fatalf("findBinDir on an empty dir: %v", err)
	}
	for _, name := range []string{etcdBinary, apiserverBinary} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := findBinDir(bin); err != nil || got != bin {
		t.Fatalf("findBinDir = %q, %v; want %q", got, err, bin)
	}
}

func TestFailedChecks(t *testing.T) {
	body := "[+]ping ok\n[-]etcd failed: reason withheld\n[+]log ok\nreadyz check failed\n"
	if got := failedChecks(body); got != "[-]etcd failed: reason withheld" {
		t.Fatalf("failedChecks = %q", got)
	}
}
