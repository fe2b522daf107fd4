package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// The shared watch and the lock keep Lease objects without their managed
// fields; a write from such an object must leave the managed fields of the
// other writers on the server as they were.
func TestLockWritesKeepOtherManagersFields(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const name, otherManager = "managed", "other-tool"
	_, err := c.Client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "mesh"}},
	}, metav1.CreateOptions{FieldManager: otherManager})
	if err != nil {
		t.Fatal(err)
	}

	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, name, c.Client, resourcelock.Config{Identity: "me"})
	if err != nil {
		t.Fatal(err)
	}
	watchable := lock.(lockcap.Watchable)
	var mu sync.Mutex
	var seen *coordinationv1.Lease
	unsubscribe := lockwatch.NewWatchHub().Subscribe(watchable, lockwatch.Subscriber{
		OnObject: func(obj any, deleted bool) {
			if l, ok := obj.(*coordinationv1.Lease); ok && !deleted {
				mu.Lock()
				seen = l
				mu.Unlock()
			}
		},
	})
	defer unsubscribe()
	var delivered *coordinationv1.Lease
	for delivered == nil {
		if ctx.Err() != nil {
			t.Fatal("the shared watch delivered no Lease")
		}
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		delivered = seen
		mu.Unlock()
	}
	if n := len(delivered.ManagedFields); n != 0 {
		t.Errorf("the shared watch delivered a Lease with %d managed fields entries, want none", n)
	}

	// Write once from the watched object, once from a read.
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	if _, _, err := watchable.Observe(delivered, false); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(ctx, resourcelock.Record{HolderIdentity: "me", LeaseDurationSeconds: 30, AcquireTime: now, RenewTime: now}); err != nil {
		t.Fatalf("update from the watched object: %v", err)
	}
	if _, _, err := lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(ctx, resourcelock.Record{HolderIdentity: "me", LeaseDurationSeconds: 30, AcquireTime: now, RenewTime: now, LeaderTransitions: 1}); err != nil {
		t.Fatalf("update from a read: %v", err)
	}

	stored, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Labels["team"] != "mesh" || stored.Spec.HolderIdentity == nil || *stored.Spec.HolderIdentity != "me" {
		t.Fatalf("stored Lease: labels %v, holder %v; want the label kept and holder me", stored.Labels, stored.Spec.HolderIdentity)
	}
	managers := map[string]bool{}
	for _, e := range stored.ManagedFields {
		managers[e.Manager] = true
	}
	if !managers[otherManager] || len(managers) < 2 {
		t.Errorf("managers of the stored Lease: %v; want %s kept beside the lock's writer", managers, otherManager)
	}
}
