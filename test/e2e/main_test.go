// Package e2e runs the meshd binary as separate processes against a real
// kube-apiserver and etcd on 127.0.0.1 (internal/testing/testcluster): crashes,
// graceful stops, restarts, default-revision changes, locks written by
// istiod, the meshd status command, and the RBAC in deploy/.
//
// TestMain builds cmd/meshd once (with -race when the tests run with -race)
// and starts one control plane for the package; every test gets its own
// namespace and its own processes, which are stopped when it ends. Set
// MESHD_E2E_BINARY to test a binary built elsewhere instead, and
// MESHD_E2E_KEEP_LOGS to a directory to keep every process's log there.
//
// Timing assertions use short leases (2s or 4s) and bounds with a margin
// for slow machines; every wait has a deadline.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

var (
	// cluster is the control plane shared by the package's tests.
	cluster *testcluster.Cluster
	// meshdBinary is the meshd executable under test.
	meshdBinary string
	// repoRoot is the repository's root directory.
	repoRoot string
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run()
	}
	binary, root, cleanup, err := meshdproc.Prepare(raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: e2e:", err)
		return 1
	}
	defer cleanup()
	meshdBinary, repoRoot = binary, root

	start := time.Now()
	cluster, err = testcluster.Start(testcluster.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: e2e: cannot start the test control plane:\n%v\n", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "e2e: control plane at %s ready in %v; meshd binary %s\n",
			cluster.Host(), time.Since(start).Round(time.Millisecond), meshdBinary)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: tests failed; control plane logs:\n%s", cluster.LogTails(20))
	}
	if err := cluster.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stop the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
