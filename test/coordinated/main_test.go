// Package coordinated runs coordinated leader election (LeaseCandidates and
// the meshd.io/prioritized strategy) against a real kube-apiserver and etcd
// on 127.0.0.1, started with the CoordinatedLeaderElection feature and the
// coordination.k8s.io/v1beta1 API turned on.
package coordinated

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

// apiServerFlags turn on coordinated leader election.
var apiServerFlags = []string{
	"--feature-gates=CoordinatedLeaderElection=true",
	"--runtime-config=coordination.k8s.io/v1beta1=true",
}

// cluster is the control plane every test of the package shares.
var cluster *testcluster.Cluster

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run()
	}
	start := time.Now()
	c, err := testcluster.Start(testcluster.Options{APIServerFlags: apiServerFlags})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: cannot start the test control plane (make kube-bins):\n%v\n", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "control plane with coordinated leader election ready in %v\n", time.Since(start).Round(time.Millisecond))
	}
	cluster = c
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "control plane logs:\n%s", c.LogTails(30))
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
