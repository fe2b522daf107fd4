package elector

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/protocol/coordination"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// TestRenewTimeOfANewTermFollowsTheWallClock: a holder whose wall clock
// stepped back during one term writes renew times ahead of it, to keep
// them rising within that term. A later term, given to it by the
// coordinator's write with a clock that agrees with the holder's, starts
// from that write and not from the renew times of the term before: its
// renewals store the holder's wall clock, as they would had the holder
// never led before.
func TestRenewTimeOfANewTermFollowsTheWallClock(t *testing.T) {
	synctest.Test(t, testRenewTimeOfANewTermFollowsTheWallClock)
}

func testRenewTimeOfANewTermFollowsTheWallClock(t *testing.T) {
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
	h.assignAt("c1", "stable", clk.Now().Round(0))
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

// TestATermBegunOnAnotherProcesssRecordRenewsAboveIt: the coordinator,
// whose wall clock is 3 s ahead of the holder's, writes the record that
// gives the holder its term. The holder's renewals store renew times above
// that record's, in whole seconds too, and rising. Renew times read from
// the holder's own clock would fall below it and, 3 s later, repeat it: in
// a lock that stores whole seconds, the same bytes as the record the term
// began on, which a follower that saw that record last (the process that
// wrote it, paused since) takes for no change, and so for a lease that
// ran out (classic seed 5400594594, a handover from a holder 3 s ahead).
func TestATermBegunOnAnotherProcesssRecordRenewsAboveIt(t *testing.T) {
	h := newHarness(t)
	c := h.startOnLease(coordOpts{identity: "c1", key: "stable"})
	const ahead = 3 * time.Second
	began := h.clock.Now().Add(ahead).Round(0)
	h.assignAt("c1", "stable", began)
	waitFor(t, "c1 to lead once assigned", c.le.IsLeader)
	assigned := resourcelock.LeaseToRecord(h.lease())
	last := began
	renewals := 0
	for range 12 {
		h.steps(1, 500*time.Millisecond)
		rec := resourcelock.LeaseToRecord(h.lease())
		if rec.HolderIdentity != "c1" || rec.LeaderTransitions != assigned.LeaderTransitions {
			t.Fatalf("record %+v after the assignment %+v: not a renewal of the assigned term", rec, assigned)
		}
		if rec.RenewTime.Equal(&metav1.Time{Time: last}) {
			continue
		}
		renewals++
		if !rec.RenewTime.After(last) {
			t.Fatalf("renewal stored %v after %v: renew times of the term fell", rec.RenewTime.UTC(), last.UTC())
		}
		if !rec.RenewTime.Truncate(time.Second).After(began.Truncate(time.Second)) {
			t.Fatalf("renewal stored %v, within or below the second of the record the term began on (%v)", rec.RenewTime.UTC(), began.UTC())
		}
		last = rec.RenewTime.Time
	}
	if renewals < 3 {
		t.Fatalf("%d renewals in 6 s, want at least 3", renewals)
	}
}

// TestATermBegunAtTheLastStorableSecondStaysReadable: a record naming c1
// carries the last renew time a record can store, 9999-12-31T23:59:59Z.
// Going on with that term, c1 must not store the second after it (the year
// 10000), which EncodeRecord writes and no reader decodes: the lock would
// read as corrupt to every candidate.
func TestATermBegunAtTheLastStorableSecondStaysReadable(t *testing.T) {
	h := newHarness(t)
	last := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	rec := held("c1", "stable", 4)
	rec.RenewTime = metav1.NewTime(last)
	h.writeRecord(rec)
	if _, err := resourcelock.DecodeRecord([]byte(annotationsOf(h.lockObject())[resourcelock.LeaderAnnotationKey])); err != nil {
		t.Fatalf("the starting record does not decode: %v", err)
	}
	le := h.elector("c1", "stable", nil, nil)
	for i := 0; i < 10; i++ {
		if out, _ := le.attempt(t.Context(), false); out == acquired {
			break
		}
		h.clock.Step(time.Second)
	}
	raw := annotationsOf(h.lockObject())[resourcelock.LeaderAnnotationKey]
	if _, err := resourcelock.DecodeRecord([]byte(raw)); err != nil {
		t.Fatalf("c1 continued a decodable record and wrote one no reader can decode: %s: %v", raw, err)
	}
}
