package testcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	// BinDirEnv names the environment variable that points at the directory
	// holding the etcd and kube-apiserver binaries. mk/kube.mk exports it.
	BinDirEnv = "KUBE_BIN_DIR"

	// rootModulePath identifies the repository root while walking up.
	rootModulePath = "github.com/meshd-io/meshd"

	etcdBinary      = "etcd"
	apiserverBinary = "kube-apiserver"
)

// errRunMakeKubeBins is the advice given whenever the binaries are missing.
const errRunMakeKubeBins = `run "make kube-bins" at the repository root to build etcd and kube-apiserver`

// findBinDir returns the directory holding etcd and kube-apiserver: override
// if non-empty, else $KUBE_BIN_DIR, else .cache/kube/bin at the repository
// root found by walking up from the working directory. It fails, telling the
// caller to run make kube-bins, if either binary is missing.
func findBinDir(override string) (string, error) {
	dir := override
	source := "Options.BinDir"
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
		source = "$" + BinDirEnv
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		root, err := RepoRoot(wd)
		if err != nil {
			return "", fmt.Errorf("testcluster: cannot locate the kube binaries: %v; set %s or %s", err, BinDirEnv, errRunMakeKubeBins)
		}
		dir = filepath.Join(root, ".cache", "kube", "bin")
		source = "the repository's .cache/kube/bin"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for _, name := range []string{etcdBinary, apiserverBinary} {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("testcluster: %s binary not found at %s (from %s): %s", name, p, source, errRunMakeKubeBins)
		}
	}
	return dir, nil
}

// RepoRoot walks up from dir to the directory whose go.mod declares the
// module github.com/meshd-io/meshd and returns it.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if mod, err := modulePath(filepath.Join(dir, "go.mod")); err == nil && mod == rootModulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod for module %s above the working directory", rootModulePath)
		}
		dir = parent
	}
}

// modulePath returns the module path declared by a go.mod file.
func modulePath(goMod string) (string, error) {
	f, err := os.Open(goMod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], "\"`"), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no module directive")
}
