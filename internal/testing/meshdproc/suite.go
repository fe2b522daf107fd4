package meshdproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

// Build builds cmd/meshd of the repository at repoRoot into out, with the
// race detector when race is set (pass the test binary's own setting, so
// that the daemon's races fail the tests too).
func Build(repoRoot, out string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/meshd")
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %v\n%s", args, err, b)
	}
	return nil
}

// StopAll stops procs at once (each with a 5s grace) and then, for each:
// copies its log to $MESHD_E2E_KEEP_LOGS/<test name>/ when that is set,
// fails t when the race detector reported a data race in it, and prints
// the tail of its log when t has failed.
func StopAll(t testing.TB, procs []*Process) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { _ = p.Stop(5 * time.Second) })
	}
	wg.Wait()
	keep := os.Getenv("MESHD_E2E_KEEP_LOGS")
	for _, p := range procs {
		log := p.Log()
		if keep != "" {
			dir := filepath.Join(keep, t.Name())
			if err := os.MkdirAll(dir, 0o755); err == nil {
				_ = os.WriteFile(filepath.Join(dir, p.Name()+".log"), []byte(log), 0o644)
			}
		}
		if strings.Contains(log, "WARNING: DATA RACE") {
			t.Errorf("%s: the race detector found a data race in meshd; see below", p.Name())
		}
		if t.Failed() {
			t.Logf("--- end of %s's log ---\n%s", p.Name(), p.LogTail(40))
		}
	}
}

// Prepare finds the repository root and the meshd binary a test suite
// runs: $MESHD_E2E_BINARY when set, else one built (see Build) into a
// temporary directory that cleanup removes.
func Prepare(race bool) (binary, repoRoot string, cleanup func(), err error) {
	cleanup = func() {}
	wd, err := os.Getwd()
	if err == nil {
		repoRoot, err = testcluster.RepoRoot(wd)
	}
	if err != nil {
		return "", "", cleanup, err
	}
	if binary = os.Getenv("MESHD_E2E_BINARY"); binary != "" {
		return binary, repoRoot, cleanup, nil
	}
	tmp, err := os.MkdirTemp("", "meshd-e2e-")
	if err != nil {
		return "", "", cleanup, err
	}
	cleanup = func() { _ = os.RemoveAll(tmp) }
	binary = filepath.Join(tmp, "meshd")
	if err := Build(repoRoot, binary, race); err != nil {
		cleanup()
		return "", "", func() {}, err
	}
	return binary, repoRoot, cleanup, nil
}
