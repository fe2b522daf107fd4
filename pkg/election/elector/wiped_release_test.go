package elector

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A follower that saw a holder's lease run, then the lock object emptied,
// then a record of another holder in it, keeps the first holder's lease:
// the writer of that record may not have seen the first holder's record
// (destroyed with the object), so its release, its expiry or its exit ends
// nothing of the first holder's work. A follower that takes the lock
// before that lease's end starts its work at that end. Simulation classic
// seed 2800187533: meshd-0 took the lock meshd-1 had written into a
// re-created object and left to expire, as soon as the kubelet reported
// meshd-1's exit, and started beside istiod, whose record the re-creation
// had destroyed.
func TestFollowerKeepsALeaseThatARecordInAnEmptiedObjectDidNotEnd(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("istiod-a", "stable", 4)) // seen at t0: its lease runs to t0+4s
	var started atomic.Bool
	f := h.start(candidateOpts{identity: "f", key: "canary",
		work: func(ctx context.Context) error { started.Store(true); <-ctx.Done(); return nil }})
	waitFor(t, "f to see the holder", func() bool { return f.le.GetLeader() == "istiod-a" })
	h.steps(2, 250*time.Millisecond)
	h.deleteLock()
	empty := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns}}
	if _, err := h.client.CoreV1().ConfigMaps(ns).Create(context.Background(), empty, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.steps(1, 250*time.Millisecond)
	h.writeRecord(held("m", "canary", 4)) // m writes into the emptied object, unaware of istiod-a
	h.steps(1, 250*time.Millisecond)
	released := held("", "", 1)
	released.AcquireTime, released.RenewTime = metav1.Time{}, metav1.Time{}
	h.writeRecord(released) // and releases it at t0+1s
	waitFor(t, "f to take the released lock", func() bool { return h.holderOrNone() == "f" && f.le.IsLeader() })
	for h.clock.Since(t0) < 4*time.Second {
		if started.Load() {
			t.Fatalf("f started its work at t0+%v, within the lease of istiod-a (to t0+4s)", h.clock.Since(t0))
		}
		h.steps(1, 250*time.Millisecond)
	}
	h.steps(1, 250*time.Millisecond)
	waitFor(t, "f's work to start once the lease of istiod-a has run out", started.Load)
}
