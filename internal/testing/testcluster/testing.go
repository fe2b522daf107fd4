package testcluster

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shared is the cluster started by Main for the current test binary.
var shared *Cluster

// Main runs a test package against one shared cluster. Call it from
// TestMain:
//
//	func TestMain(m *testing.M) { testcluster.Main(m) }
//
// It starts the cluster, runs the tests, stops the cluster and exits with
// the tests' status. If the cluster cannot start, it prints why (for missing
// binaries: run make kube-bins) and exits with status 1, so the package
// fails instead of silently skipping. With -test.list no cluster is started.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main without the exit: it returns the tests' status, for a
// TestMain that has its own clean-up to do after the tests.
func Run(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run()
	}
	start := time.Now()
	c, err := Start(Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: testcluster: cannot start the test control plane:\n%v\n", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "testcluster: control plane at %s ready in %v\n", c.Host(), time.Since(start).Round(time.Millisecond))
	}
	shared = c
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "testcluster: tests failed; control plane logs:\n%s", c.LogTails(20))
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: stop: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Get returns the cluster started by Main. It fails the test if the package
// has no TestMain calling Main.
func Get(t testing.TB) *Cluster {
	t.Helper()
	if shared == nil {
		t.Fatal("testcluster.Get: no cluster; the package needs func TestMain(m *testing.M) { testcluster.Main(m) }")
	}
	return shared
}

// NewNamespace creates a namespace with a unique name derived from the test's
// name and deletes it when the test ends. Deleted namespaces stay
// Terminating, since no namespace controller runs, but their names are never
// reused.
func (c *Cluster) NewNamespace(t testing.TB) string {
	t.Helper()
	name := namespaceName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"meshd.io/testcluster": "true"},
	}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testcluster: create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testcluster: delete namespace %s: %v", name, err)
		}
	})
	return name
}

// namespaceName turns a test name into a valid, unique namespace name: "t-",
// the lowercased name with other characters replaced by '-', and a random
// suffix, at most 63 characters.
func namespaceName(testName string) string {
	var b strings.Builder
	lastDash := true
	for _, r := range strings.ToLower(testName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			lastDash = false
		} else if !lastDash {
			b.WriteByte('-')
			lastDash = true
		}
	}
	base := strings.Trim(b.String(), "-")
	const maxBase = 63 - len("t-") - len("-") - 8
	if len(base) > maxBase {
		base = strings.TrimRight(base[:maxBase], "-")
	}
	if base == "" {
		base = "test"
	}
	return "t-" + base + "-" + randomSuffix(8)
}

// randomSuffix returns n random lowercase letters and digits.
func randomSuffix(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
