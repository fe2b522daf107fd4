// Package demorun is what the demo commands share: finding the meshd
// binary, and running a demo until it ends or is interrupted.
package demorun

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

// FindMeshd returns the absolute path of the meshd binary: path, or
// bin/meshd at the repository root when path is empty. The error names
// makeTarget, the make target that builds the binary and runs the demo.
func FindMeshd(path, makeTarget string) (string, error) {
	if path == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		root, err := testcluster.RepoRoot(wd)
		if err != nil {
			return "", fmt.Errorf("cannot find bin/meshd: %w; pass -meshd", err)
		}
		path = filepath.Join(root, "bin", "meshd")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("no meshd binary at %s: run \"make build\" (or make %s, which builds it)", abs, makeTarget)
	}
	return abs, nil
}

// Run runs demo with a context that the first Ctrl-C (or SIGTERM)
// cancels, so that the demo cleans up; once it is cancelled the handler is
// removed, and a second one ends the process at once (the meshd children
// die with it, see meshdproc). It returns the exit code: 0, 130 when
// interrupted, 1 when demo failed, reported on stderr under name.
func Run(name string, demo func(ctx context.Context) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := demo(ctx)
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		fmt.Fprintf(os.Stderr, "\n%s: interrupted; everything it started has been stopped\n", name)
		return 130
	default:
		fmt.Fprintf(os.Stderr, "\n%s: FAILED: %v\n", name, err)
		return 1
	}
}
