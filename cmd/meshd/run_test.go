package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/features"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// TestRun runs "meshd run" in-process until its context ends, as a signal
// would end it: it leads, then releases its lock and exits 0.
func TestRun(t *testing.T) {
	// klog's logger, which meshd sets at start, is left in place: resetting
	// it here raced with client-go's event goroutine, which reads it, even
	// after the leak check saw that goroutine end (a goroutine's end orders
	// nothing for the race detector). It writes into a buffer that stays
	// valid.
	t.Cleanup(func() { features.Default().SetLogger(nil) })
	checkLeaks(t)
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- execute(ctx, []string{"--kubeconfig", kubeconfig, "--namespace", ns, "--identity", "meshd-cli",
			"--ttl", "2s", "--monitoring-address", "127.0.0.1:0", "--controllers", "namespace", "--log-format", "console"},
			&stdout, &stderr)
	}()
	// klog.SetLogger, which meshd calls at start, must not race with other
	// users of client-go: talk to the cluster only once meshd runs.
	waitFor(t, exited, &stderr, "meshd running")

	getRecord := func() (*resourcelock.Record, error) {
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), election.NamespaceController, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey]))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, err := getRecord()
		if err == nil && rec.HolderIdentity == "meshd-cli" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("meshd did not take the lock: %+v, %v\n%s", rec, err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("meshd did not exit")
	}
	for _, want := range []string{"starting meshd", "released the lock", "meshd stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr.String())
		}
	}
	rec, err := getRecord()
	if err != nil || rec.HolderIdentity != "" {
		t.Fatalf("lock after exit: %+v, %v", rec, err)
	}
}

// checkLeaks fails the test if it leaves goroutines behind. Call it first,
// so that it runs after every other cleanup. Idle keep-alive connections of
// client-go's shared transports are not leaks.
func checkLeaks(t *testing.T) {
	opts := []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// waitFor waits until log contains want, failing if meshd exits first.
func waitFor(t *testing.T, exited <-chan int, log *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(log.String(), want) {
		select {
		case code := <-exited:
			t.Fatalf("meshd exited %d before logging %q:\n%s", code, want, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("meshd did not log %q:\n%s", want, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
