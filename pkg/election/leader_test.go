package election

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// OnNewLeader reports the lock's holder as it changes: nobody before the
// lock exists, this process when it leads, then whoever the record names
// (here an istiod written straight into the lock), then nobody once the
// lock is gone; repeated writes by the same holder are not reported.
func TestOnNewLeader(t *testing.T) {
	client := kubetest.NewClientset()
	le, err := New(client, Spec{Namespace: "mesh", ElectionID: "my-controller-leader", Identity: "a", Revision: "stable"})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got []Leader
	)
	seen := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- OnNewLeader(ctx, client, le, func(l Leader) {
			mu.Lock()
			got = append(got, l)
			mu.Unlock()
			seen <- struct{}{}
		})
	}()
	waitFor := func(n int) {
		t.Helper()
		for {
			mu.Lock()
			have := len(got)
			mu.Unlock()
			if have >= n {
				return
			}
			select {
			case <-seen:
			case <-time.After(10 * time.Second):
				t.Fatalf("%d reports, want %d: %+v", have, n, got)
			}
		}
	}
	waitFor(1) // nobody: no lock yet

	// This process leads: the lock names it.
	runCtx, stopRun := context.WithCancel(context.Background())
	leading := make(chan struct{})
	le.Add(func(ctx context.Context) error { close(leading); <-ctx.Done(); return nil })
	ran := make(chan error, 1)
	go func() { ran <- le.RunContext(runCtx) }()
	<-leading
	waitFor(2)
	stopRun()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	// Someone else's record, written into the lock twice.
	cms := client.CoreV1().ConfigMaps("mesh")
	for i := range 2 {
		cm, err := cms.Get(context.Background(), "my-controller-leader", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec := resourcelock.Record{HolderIdentity: "istiod-x", HolderKey: "canary", LeaseDurationSeconds: 30,
			AcquireTime: metav1.Now(), RenewTime: metav1.Now(), LeaderTransitions: 7 + i}
		cm.Annotations[resourcelock.LeaderAnnotationKey] = string(resourcelock.EncodeRecord(rec))
		if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			waitFor(4) // released by a ("" after its stop), then istiod-x
		}
	}
	if err := cms.Delete(context.Background(), "my-controller-leader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(5)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []Leader{{}, {Identity: "a", Key: "stable"}, {}, {Identity: "istiod-x", Key: "canary", Transitions: 7}, {}}
	if len(got) != len(want) {
		t.Fatalf("reports %+v, want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		if g.Identity != want[i].Identity || g.Key != want[i].Key || (want[i].Transitions != 0 && g.Transitions != want[i].Transitions) {
			t.Errorf("report %d = %+v, want %+v", i, g, want[i])
		}
	}
}

// A lock kind OnNewLeader does not know is an error, not a hang.
func TestOnNewLeaderRefusesAnUnknownLock(t *testing.T) {
	le, err := New(kubetest.NewClientset(), Spec{Namespace: "mesh", ElectionID: "x", Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	le.spec.Lock = "Secret"
	if err := OnNewLeader(context.Background(), kubetest.NewClientset(), le, func(Leader) {}); err == nil {
		t.Fatal("no error for a Secret lock")
	}
}
