// Package e2ecoordinated runs the meshd binary as separate processes in
// coordinated mode (meshd run --election-mode coordinated) against a real
// kube-apiserver and etcd on 127.0.0.1 that serve coordinated leader
// election: LeaseCandidates, the meshd.io/prioritized strategy, a default
// flip through spec.preferredHolder, and the crash of the coordinator.
//
// TestMain builds cmd/meshd once (with -race when the tests run with -race)
// and starts one control plane, with the CoordinatedLeaderElection feature
// and the coordination.k8s.io/v1beta1 API turned on, for the package; every
// test gets its own namespace and its own processes, stopped when it ends.
// Set MESHD_E2E_BINARY to test a binary built elsewhere instead, and
// MESHD_E2E_KEEP_LOGS to a directory to keep every process's log there.
//
// Timing assertions use 2s leases; every wait has a deadline.
package e2ecoordinated

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

// apiServerFlags turn on coordinated leader election.
var apiServerFlags = []string{
	"--feature-gates=CoordinatedLeaderElection=true",
	"--runtime-config=coordination.k8s.io/v1beta1=true",
}

var (
	// cluster is the control plane shared by the package's tests.
	cluster *testcluster.Cluster
	// client talks to cluster as its admin, without logging the API
	// server's deprecation warning for every LeaseCandidate request.
	client kubernetes.Interface
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
		fmt.Fprintln(os.Stderr, "FAIL: e2ecoordinated:", err)
		return 1
	}
	defer cleanup()
	meshdBinary, repoRoot = binary, root

	start := time.Now()
	cluster, err = testcluster.Start(testcluster.Options{APIServerFlags: apiServerFlags})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: e2ecoordinated: cannot start the test control plane:\n%v\n", err)
		return 1
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WarningHandler = rest.NoWarnings{}
	if client, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: e2ecoordinated:", err)
		_ = cluster.Stop()
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "e2ecoordinated: control plane with coordinated leader election at %s ready in %v; meshd binary %s\n",
			cluster.Host(), time.Since(start).Round(time.Millisecond), meshdBinary)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2ecoordinated: tests failed; control plane logs:\n%s", cluster.LogTails(20))
	}
	if err := cluster.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "e2ecoordinated: stop the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
