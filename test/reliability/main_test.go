// Package reliability tests meshd under faults and bad input against a real
// kube-apiserver and etcd on 127.0.0.1: a short, fixed-seed chaos run
// (internal/tools/chaos, whose long form is "make chaos"), and the inputs a lock,
// a cluster or a configuration can get wrong. The tests restart the API
// server and so do not run in parallel.
package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

// cluster is the control plane every test of the package shares.
var cluster *testcluster.Cluster

// apiServerFlags make kube-apiserver end open watches when it shuts down
// instead of waiting for them (up to a minute), so that a restart is quick.
var apiServerFlags = []string{"--shutdown-watch-termination-grace-period=2s"}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	c, err := testcluster.Start(testcluster.Options{APIServerFlags: apiServerFlags})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: cannot start the test control plane (make kube-bins):\n%v\n", err)
		return 1
	}
	cluster = c
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "control plane logs:\n%s", c.LogTails(20))
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop the control plane: %v\n", err)
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	return code
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// meshdBinary builds ./cmd/meshd once for the package.
func meshdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "meshd-reliability-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "meshd")
		var root string
		if root, buildErr = testcluster.RepoRoot("."); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/meshd")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/meshd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	created, err := cluster.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Client.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
	return created.Name
}
