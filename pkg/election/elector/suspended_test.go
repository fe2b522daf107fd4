package elector

import (
	"context"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/protocol/damping"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// suspendedCandidate returns a cooperative candidate c that outranks every
// holder and whose preemption is suspended: a holder with key "stable"
// took the lock from it, and c wanted it back within the cycle window.
func suspendedCandidate(h *harness) *LeaderElector {
	h.t.Helper()
	lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "c", Key: "canary"})
	if err != nil {
		h.t.Fatal(err)
	}
	cfg := Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:     Callbacks{OnStartedLeading: waitDone},
		KeyComparison: func(string) bool { return true },
		Clock:         h.clock,
	}
	le, err := New(cooperative(cfg, 2*time.Second, func(string) bool { return false }))
	if err != nil {
		h.t.Fatal(err)
	}
	now := h.clock.Now()
	le.damper.Stolen(now.Add(-time.Second), "stable", true) // hold-off until a lease later: now+3s
	if v := le.damper.Check(now.Add(-500*time.Millisecond), "stable"); v != damping.Cycle {
		h.t.Fatalf("damper verdict %v, want a cycle", v)
	}
	return le
}

// While its preemption is suspended after a steal cycle, a candidate still
// asks a cooperative holder to hand over (a holder that agrees cannot be
// part of a cycle), so that the lock moves as soon as every candidate sees
// the same default; it never takes the lock by force, neither from a
// holder that cannot answer nor when a request goes unanswered. Before, a
// suspended candidate did not ask at all, and a holder every candidate
// agreed was outranked kept the election until the hold-off ended.
func TestSuspendedCandidateAsksButNeverForces(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("h", "^canary", 4))
	c := suspendedCandidate(h)
	ctx := context.Background()

	// An istiod-shaped holder cannot answer: a candidate free to preempt
	// would take the lock; a suspended one does not.
	mustAttempt(t, c, false, heldByOther)
	if rec := h.record(); rec.HolderIdentity != "h" {
		t.Fatalf("a suspended candidate took the lock by force: %+v", rec)
	}

	// A meshd holder that answers: the suspended candidate asks it.
	h.setHandover(`{"holder":"h"}`)
	mustAttempt(t, c, false, heldByOther)
	if got := h.handover(); got.Candidate != "c" || got.CandidateKey != "canary" {
		t.Fatalf("handover annotation %+v, want a request from c", got)
	}

	// Unanswered past the grace period: still no force while suspended.
	h.clock.Step(2500 * time.Millisecond) // past the grace (2s), within the hold-off (until +3s)
	rec := h.record()
	out, err := c.mayPreempt(ctx, &rec, h.clock.Now())
	if err != nil || out != heldByOther {
		t.Fatalf("unanswered request while suspended: %v (%v), want held by other", out, err)
	}
	if !c.damper.State().Suspended {
		t.Fatal("the suspension ended by itself")
	}
}
