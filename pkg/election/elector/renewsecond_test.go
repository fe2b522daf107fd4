package elector

import (
	"context"
	"testing"
	"time"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A ConfigMap record keeps its times in whole seconds: a renew in the same
// second as the previous one leaves the record as it was, and followers
// time the lease from the earlier renew. The holder's renew deadline must
// count from it too; before, it counted from the invisible renew, so a
// holder cut off from the API kept working up to a second longer than its
// followers allowed (with work that overran its stop timeout: an overlap,
// the shape a review reported at classic seed 990252, which the seed no
// longer reproduces since the simulation became deterministic).
func TestRenewWithinTheSameSecondDoesNotExtendTheDeadline(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	h.clock.SetTime(t0.Add(100 * time.Millisecond))
	mustAttempt(t, le, false, acquired)
	le.loop.lastRenew = h.clock.Now()
	visible := le.loop.lastRenew

	h.clock.SetTime(t0.Add(900 * time.Millisecond)) // same second: "…:05Z" again
	if end := le.renewOnce(context.Background()); end != nil {
		t.Fatalf("renew ended the term: %+v", end)
	}
	if !le.loop.lastRenew.Equal(visible) {
		t.Fatalf("last renew = %v, want the visible one at %v", le.loop.lastRenew, visible)
	}

	h.clock.SetTime(t0.Add(1200 * time.Millisecond)) // next second: followers see it
	if end := le.renewOnce(context.Background()); end != nil {
		t.Fatalf("renew ended the term: %+v", end)
	}
	if !le.loop.lastRenew.Equal(h.clock.Now()) {
		t.Fatalf("last renew = %v, want %v", le.loop.lastRenew, h.clock.Now())
	}

	// A Lease stores microseconds: every renew is visible.
	hl := newLeaseHarness(t)
	ll := hl.leaseElector("a")
	mustAttempt(t, ll, false, acquired)
	ll.loop.lastRenew = hl.clock.Now()
	hl.clock.Step(300 * time.Millisecond)
	if end := ll.renewOnce(context.Background()); end != nil {
		t.Fatalf("renew ended the term: %+v", end)
	}
	if !ll.loop.lastRenew.Equal(hl.clock.Now()) {
		t.Fatalf("Lease: last renew = %v, want %v", ll.loop.lastRenew, hl.clock.Now())
	}
}

// leaseElector is a polling Lease candidate.
func (h *harness) leaseElector(identity string) *LeaderElector {
	h.t.Helper()
	lock, err := resourcelock.NewLeaseLock(h.client.CoordinationV1(), ns, lockName, resourcelock.Config{Identity: identity})
	if err != nil {
		h.t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks: Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })},
		Clock:     h.clock,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return le
}
