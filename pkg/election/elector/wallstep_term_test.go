package elector

import (
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meshd-io/meshd/internal/protocol/coordination"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// TestRenewTimeOfANewTermFollowsTheWallClock: a holder whose wall clock
// stepped back during one term writes renew times ahead of it, to keep
// them rising within that term. A later term, given to it by the
// coordinator's write, starts from that write and not from the renew
// times of the term before: its renewals store the holder's wall clock,
// as they would had the holder never led before.
func TestRenewTimeOfANewTermFollowsTheWallClock(t *testing.T) {
	h := newHarness(t)
	clk := &steppedClock{FakeClock: h.clock}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, lockName, h.client, resourcelock.Config{Identity: "c1", Key: "stable"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:       Callbacks{OnStartedLeading: waitDone},
		ReleaseOnCancel: true,
		Watch:           true,
		Clock:           clk,
		Logger:          zaptest.NewLogger(t).Named("c1"),
	}
	cfg.Coordination = coordination.New(coordination.Config{LeaseDuration: cfg.LeaseDuration})
	le, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.assign("c1", "stable")
	c := h.run(le)
	defer c.stop()
	waitFor(t, "c1 to lead once assigned", le.IsLeader)
	h.steps(2, time.Second)
	const step = -time.Hour
	clk.wall.Store(int64(step))
	h.steps(3, time.Second)
	if !le.IsLeader() {
		t.Fatal("c1 lost its term to a step of its wall clock")
	}
	if lead := resourcelock.LeaseToRecord(h.lease()).RenewTime.Sub(clk.Now().Round(0)); lead < -step/2 {
		t.Fatalf("renew times of the stepped term lead the wall clock by %v, want about the step %v", lead, -step)
	}

	// The coordinator gives the lock to another candidate, and later back.
	h.assign("c2", "stable")
	h.stepUntil(3*time.Second, func() bool { return !le.IsLeader() })
	if le.IsLeader() {
		t.Fatal("c1 still leads on a record naming c2")
	}
	h.steps(6, time.Second)
	h.assign("c1", "stable")
	h.stepUntil(3*time.Second, le.IsLeader)
	if !le.IsLeader() {
		t.Fatal("c1 did not lead on the coordinator's record naming it")
	}
	assigned := resourcelock.LeaseToRecord(h.lease())
	h.steps(3, time.Second)
	rec := resourcelock.LeaseToRecord(h.lease())
	if rec.HolderIdentity != "c1" || rec.LeaderTransitions != assigned.LeaderTransitions {
		t.Fatalf("record %+v after the assignment %+v: not a renewal of the assigned term", rec, assigned)
	}
	if rec.RenewTime.Equal(&assigned.RenewTime) {
		t.Fatalf("c1 did not renew the assigned term in 3 s: %+v", rec)
	}
	wall := clk.Now().Round(0)
	if lead := rec.RenewTime.Sub(wall); lead > 2*time.Second {
		t.Fatalf("a renewal of the new term stored %v, %v ahead of the holder's wall clock %v, which did not step during this term: the renew times of the term before carried over", rec.RenewTime.UTC(), lead, wall)
	}
}
