// Package multicluster runs meshd processes against two real API servers
// (two kube-apiservers with an etcd each, on 127.0.0.1): a mesh of two
// clusters, each the other's remote, found through kubeconfig Secrets
// labelled istio/multiCluster=true, as istiod finds them.
//
// TestMain builds cmd/meshd once (with -race when the tests run with
// -race) and starts both control planes for the package; every test gets
// its own namespace, of the same name in both clusters, and its own
// processes. Set MESHD_E2E_BINARY to test a binary built elsewhere and
// MESHD_E2E_KEEP_LOGS to a directory to keep every process's log.
//
// Leases are short (2s) and every wait has a deadline.
package multicluster

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
	// clusters are the two control planes, "east" and "west".
	clusters    []*testcluster.Cluster
	meshdBinary string
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run()
	}
	binary, _, cleanup, err := meshdproc.Prepare(raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: multicluster:", err)
		return 1
	}
	defer cleanup()
	meshdBinary = binary

	start := time.Now()
	// ClusterTrustBundles are a beta API, off by default.
	clusters, err = testcluster.StartSeveral(2, testcluster.Options{APIServerFlags: []string{
		"--feature-gates=ClusterTrustBundle=true",
		"--runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true",
	}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: multicluster: cannot start two test control planes:\n%v\n", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "multicluster: control planes at %s and %s ready in %v; meshd binary %s\n",
			clusters[0].Host(), clusters[1].Host(), time.Since(start).Round(time.Millisecond), meshdBinary)
	}
	code := m.Run()
	if code != 0 {
		for i, c := range clusters {
			fmt.Fprintf(os.Stderr, "multicluster: tests failed; logs of control plane %d:\n%s", i, c.LogTails(20))
		}
	}
	if err := testcluster.StopAll(clusters); err != nil {
		fmt.Fprintf(os.Stderr, "multicluster: stop the control planes: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
