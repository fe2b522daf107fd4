package elector

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// fencedSteal sets up a forced steal with a fenced start: the holder
// "istiod-a" (no handover annotation: it does not cooperate) is seen at t0
// with a 4s lease; candidate c becomes entitled at t0+1.5s and takes the
// lock, so its work may start at t0+4s. c renews at t0+2.5s and t0+3.5s;
// fencedSteal returns at t0+3.75s, after the second renew, with the
// fence still ahead and c's next renew at t0+4.5s.
func (h *harness) fencedSteal(poll bool, started *atomic.Bool) *candidate {
	h.t.Helper()
	h.writeRecord(held("istiod-a", "canary", 4))
	var entitled atomic.Bool
	c := h.start(candidateOpts{identity: "c", key: "stable", poll: poll, noHandover: true,
		stealFn: func(string) bool { return entitled.Load() },
		work:    func(ctx context.Context) error { started.Store(true); <-ctx.Done(); return nil }})
	waitFor(h.t, "c to see the holder", func() bool { return c.le.GetLeader() == "istiod-a" })
	h.steps(6, 250*time.Millisecond)
	entitled.Store(true)
	c.le.Trigger()
	waitFor(h.t, "c to take the lock", func() bool { return h.record().HolderIdentity == "c" })
	entitled.Store(false) // c never takes the lock back from the next writer
	h.parkedSteps(9, 250*time.Millisecond, 2)
	// A ConfigMap record keeps whole seconds: the renew at t0+3.5s shows as t0+3s.
	renewed := t0.Add(3 * time.Second)
	waitFor(h.t, "c's renew at t0+3.5s", func() bool { return h.record().RenewTime.Time.Equal(renewed) })
	return c
}

// parkedSteps advances the fake clock n times by d, each step only once
// the fake clock has the given number of waiters (a term loop waiting for
// its fence and its next renew has two), so that a renew is never late
// because the machine is slow.
func (h *harness) parkedSteps(n int, d time.Duration, waiters int) {
	h.t.Helper()
	for i := 0; i < n; i++ {
		waitFor(h.t, "the elector to wait on its timers", func() bool { return h.clock.Waiters() == waiters })
		h.clock.Step(d)
	}
}

// A holder that took the lock by force and learns of nothing but what it
// reads (polling) must not start its work at the fence if another holder
// took the lock meanwhile: it renews first. Before the fix the work
// started at the fence beside the new holder and ran until the next renew.
// A watching holder has already ended its term when the watch showed the
// new holder.
func TestFencedStartChecksTheLockIsStillHeld(t *testing.T) {
	for _, tc := range []struct {
		name string
		poll bool
	}{{"polling", true}, {"watching", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			var started atomic.Bool
			c := h.fencedSteal(tc.poll, &started)
			x := held("x", "other", 4)
			x.AcquireTime, x.RenewTime = metav1.NewTime(h.clock.Now()), metav1.NewTime(h.clock.Now())
			h.writeRecord(x) // another holder takes the lock before the fence
			if !tc.poll {
				waitFor(t, "the watch to end c's term", func() bool { return !c.le.IsLeader() })
			}
			h.client.ClearActions()
			h.steps(4, 100*time.Millisecond) // t0+4.15s: past the fence, before c's next renew
			if started.Load() {
				t.Fatal("the work started at the fence although another holder had taken the lock")
			}
			if tc.poll {
				waitFor(t, "c's term to end", func() bool { return !c.le.IsLeader() })
				// The fence made c renew: its update conflicted and the read
				// showed x (then c contends again as a follower).
				got := h.verbs()
				assertVerbs(t, got[:min(2, len(got))], "update configmaps", "get configmaps")
			}
			h.steps(4, 250*time.Millisecond) // t0+5.15s
			if started.Load() {
				t.Fatal("the work started after the lock was lost")
			}
			if rec := h.record(); rec.HolderIdentity != "x" {
				t.Fatalf("record %+v, want x's", rec)
			}
		})
	}
}

// A watching holder renews at its fence before its work starts, also when
// its watch has shown no other holder: a watch may hand such a write over
// late (it lags) or after a list older than it (it broke and came back),
// so silence proves nothing. It starts only once that renew succeeded.
// Before, it trusted a healthy watch and started beside a holder that had
// taken the lock object re-created while it waited (simulation seeds
// 628705758, after a break, and 900173134, behind a lagging watch).
func TestFencedStartRenewsFirstWithAWatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		breaks bool
	}{{"watch worked throughout", false}, {"watch broke and came back", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			var started atomic.Bool
			c := h.fencedSteal(false, &started)
			if tc.breaks {
				c.le.watch.SetHealth(false)
				c.le.watch.SetHealth(true)
			}
			h.client.ClearActions()
			h.parkedSteps(3, 100*time.Millisecond, 2) // t0+4.05s: the fence passed
			waitFor(t, "the work to start", started.Load)
			assertVerbs(t, h.verbs(), "update configmaps")
		})
	}
}

// A polling holder whose renew at the fence fails does not know whether it
// still holds the lock: its work starts only after the next renew
// succeeded.
func TestFencedStartWaitsForASuccessfulRenew(t *testing.T) {
	h := newHarness(t)
	var started, failing atomic.Bool
	h.client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		}
		return false, nil, nil
	})
	c := h.fencedSteal(true, &started)
	failing.Store(true)
	h.parkedSteps(3, 100*time.Millisecond, 2) // t0+4.05s: the fence passes,
	waitFor(t, "the renew at the fence to fail, or the work to start", func() bool { return c.le.LastError() != nil || started.Load() })
	if started.Load() {
		t.Fatal("the work started at the fence without a successful renew")
	}
	h.parkedSteps(1, 100*time.Millisecond, 1) // t0+4.15s
	if started.Load() {
		t.Fatal("the work started although the renew at the fence failed")
	}
	if err := c.le.LastError(); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("LastError = %v, want the failed renew", err)
	}
	failing.Store(false)
	h.parkedSteps(3, 250*time.Millisecond, 1) // t0+4.9s: no renew since the fence
	if started.Load() {
		t.Fatal("the work started before a renew succeeded")
	}
	h.clock.Step(250 * time.Millisecond) // t0+5.15s: the renew due at t0+5.05s succeeds
	waitFor(t, "the work to start after the successful renew", started.Load)
	if rec := h.record(); rec.HolderIdentity != "c" || !c.le.IsLeader() {
		t.Fatalf("record %+v, leader %v", rec, c.le.IsLeader())
	}
}

// The fence itself still holds for a watching and a polling holder that
// nobody disturbs: no start before it, a start right after it.
func TestFencedStartWithoutInterference(t *testing.T) {
	for _, poll := range []bool{true, false} {
		h := newHarness(t)
		var started atomic.Bool
		h.fencedSteal(poll, &started)
		h.parkedSteps(2, 100*time.Millisecond, 2) // t0+3.95s
		if started.Load() {
			t.Fatalf("poll=%v: the work started before the fence", poll)
		}
		h.clock.Step(100 * time.Millisecond) // t0+4.05s
		waitFor(t, "the work to start at the fence", started.Load)
		if rec := h.record(); rec.HolderIdentity != "c" {
			t.Fatalf("poll=%v: record %+v", poll, rec)
		}
	}
}

// A holder waiting out its fence that finds its lock object re-created
// without a record cannot tell whether another elector took the empty
// object meanwhile and lost it to a second re-creation (one of client-go's
// shape starts its work at once): it writes its record again, but its work
// starts no earlier than a lease after that write. Before, it started at
// the old fence beside such a holder (simulation seed 200025106, named
// scenario seed-200025106). The same holds for a deleted object.
func TestFencedHolderWaitsALeaseAfterItsRecordWasDestroyed(t *testing.T) {
	for _, recreate := range []bool{true, false} {
		t.Run(map[bool]string{true: "re-created", false: "deleted"}[recreate], func(t *testing.T) {
			h := newHarness(t)
			var started atomic.Bool
			c := h.fencedSteal(true, &started) // t0+3.75s, fence at t0+4s, next renew at t0+4.5s
			h.deleteLock()
			if recreate {
				empty := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns}}
				if _, err := h.client.CoreV1().ConfigMaps(ns).Create(context.Background(), empty, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			h.client.ClearActions()
			// t0+4s: the fence passes and c renews first; its update finds
			// the record gone and it writes its record again.
			h.parkedSteps(1, 250*time.Millisecond, 2)
			waitFor(t, "c to write its record again", func() bool { return h.holderOrNone() == "c" })
			rewritten := h.clock.Now()
			if started.Load() {
				t.Fatal("the work started at the old fence after the record was destroyed")
			}
			want := "update configmaps"
			if !recreate {
				want = "create configmaps"
			}
			if got := h.verbs(); !slices.Contains(got, want) {
				t.Fatalf("verbs %v, want a %q", got, want)
			}
			// c keeps renewing while it waits; its work starts a lease after
			// the write, and not before.
			for h.clock.Since(rewritten) < 4*time.Second-250*time.Millisecond {
				h.parkedSteps(1, 250*time.Millisecond, 2)
				if started.Load() {
					t.Fatalf("the work started %v after the record was written again, within a lease", h.clock.Since(rewritten))
				}
			}
			h.parkedSteps(1, 250*time.Millisecond, 2)
			waitFor(t, "the work to start a lease after the record was written again", started.Load)
			if !c.le.IsLeader() || h.record().HolderIdentity != "c" {
				t.Fatalf("c leads %v, record %+v", c.le.IsLeader(), h.record())
			}
		})
	}
}

// holderOrNone is the holder the lock object names, or "" while it is
// missing or holds no record.
func (h *harness) holderOrNone() string {
	obj, err := h.getLock()
	if err != nil {
		return ""
	}
	if l, ok := obj.(*coordinationv1.Lease); ok {
		return resourcelock.LeaseToRecord(l).HolderIdentity
	}
	rec, err := resourcelock.DecodeRecord([]byte(annotationsOf(obj)[resourcelock.LeaderAnnotationKey]))
	if err != nil {
		return ""
	}
	return rec.HolderIdentity
}

// A holder whose fence has not passed when it accepts a handover request
// hands the lock over at the fence, but the candidate, which asked a while
// before, may have gone: it names it with a brief lease. Before, it
// released the lock instead, and a lesser candidate that watches, or the
// holder itself, took the released lock before the entitled candidate
// (simulation session seed 1839 and classic seed 991594, checked by the
// priority invariant). If the candidate never comes, the lock is free once
// the brief lease has run out.
func TestHolderNamesTheCandidateAtItsFenceWithABriefLease(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("istiod-a", "canary", 4))
	var entitled, started atomic.Bool
	c := h.start(candidateOpts{identity: "c", key: "stable", accept: true,
		stealFn: func(string) bool { return entitled.Load() },
		work:    func(ctx context.Context) error { started.Store(true); <-ctx.Done(); return nil }})
	waitFor(t, "c to see the holder", func() bool { return c.le.GetLeader() == "istiod-a" })
	entitled.Store(true)
	c.le.Trigger()
	waitFor(t, "c to take the lock", func() bool { return h.holderOrNone() == "c" })
	entitled.Store(false)
	// d asks for the lock at t0; c accepts but must wait out its fence
	// (t0+4s) before anyone may start.
	h.setHandover(`{"holder":"c","candidate":"d","candidateKey":"stable","requestTime":"2026-01-02T03:04:05Z"}`)
	waitFor(t, "c to accept", func() bool { return h.handover().Answer == lockmeta.AnswerAccepted })
	// t0+4s: the fence passes. Steps go on until c names d (a lagging
	// elector may set its timer for the fence from a reading a step old),
	// up to 2s past the fence.
	for i := 0; i < 24 && h.holderOrNone() != "d"; i++ {
		h.steps(1, 250*time.Millisecond)
	}
	waitFor(t, "c to name d", func() bool { return h.holderOrNone() == "d" })
	named := h.clock.Now()
	if started.Load() {
		t.Fatal("c's work started although it accepted the request before its fence")
	}
	// ttl 4s: the brief lease is a RetryPeriod, 1s.
	if rec := h.record(); rec.HolderKey != "stable" || rec.LeaseDurationSeconds != 1 {
		t.Fatalf("record %+v, want d's key and a lease of 1s", rec)
	}
	for h.clock.Since(named) < time.Second {
		h.steps(1, 250*time.Millisecond)
		if got := h.holderOrNone(); got != "d" {
			t.Fatalf("%q took the lock %v after it was handed to d, within d's lease", got, h.clock.Since(named))
		}
	}
	// d never comes: the lock is free, and c takes it.
	h.steps(8, 250*time.Millisecond)
	waitFor(t, "c to take the lock once d's brief lease ran out", func() bool { return h.holderOrNone() == "c" && c.le.IsLeader() })
}

// A holder that took the lock by force and whose work has not started
// names at once a candidate whose request says it honours fences, with the
// time left to its fence in the answer; the record naming the candidate
// carries it on, and the candidate's work starts no earlier than that after
// it sees the record. The work of the holder the lock was taken from may
// run until the fence, so nothing starts before it, and the better
// candidate holds the election meanwhile. Before, the holder named it only
// at its fence, and a chain of forced takes kept the best candidate waiting
// past the priority bound (simulation session seed 2800519349).
func TestFencedHolderNamesAFenceAwareCandidateAtOnce(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("istiod-a", "canary", 4))
	var entitled, cStarted, dStarted atomic.Bool
	c := h.start(candidateOpts{identity: "c", key: "stable", accept: true,
		stealFn: func(string) bool { return entitled.Load() },
		work:    func(ctx context.Context) error { cStarted.Store(true); <-ctx.Done(); return nil }})
	waitFor(t, "c to see the holder", func() bool { return c.le.GetLeader() == "istiod-a" })
	entitled.Store(true)
	c.le.Trigger()
	waitFor(t, "c to take the lock", func() bool { return h.holderOrNone() == "c" })
	took := h.clock.Now() // c's fence: a lease on, took+4s
	entitled.Store(false)
	h.start(candidateOpts{identity: "d", key: "stable", steal: true,
		work: func(ctx context.Context) error { dStarted.Store(true); <-ctx.Done(); return nil }})
	waitFor(t, "c to name d", func() bool { return h.holderOrNone() == "d" })
	if named := h.clock.Since(took); named >= time.Second {
		t.Fatalf("c named d %v after it took the lock; want at once, before its fence", named)
	}
	if rec := h.record(); rec.HolderKey != "stable" || rec.LeaseDurationSeconds != 4 {
		t.Fatalf("record %+v, want d's key and a full lease", rec)
	}
	for h.clock.Since(took) < 4*time.Second {
		if dStarted.Load() || cStarted.Load() {
			t.Fatalf("work started %v after the forced take, before the fence (c %v, d %v)", h.clock.Since(took), cStarted.Load(), dStarted.Load())
		}
		h.steps(1, 250*time.Millisecond)
	}
	h.steps(2, 250*time.Millisecond)
	waitFor(t, "d's work to start after the fence", dStarted.Load)
	if cStarted.Load() || h.holderOrNone() != "d" {
		t.Fatalf("c's work started %v; holder %q", cStarted.Load(), h.holderOrNone())
	}
}

// TestStartAtOnceNeedsTheComparisonWhenTheStealLands: with
// StartAtOnceAfterSteal a candidate that takes the lock by force starts its
// work at once, beside the old holder's until that holder notices. That is
// a privilege of a candidate that outranks the holder: one whose
// comparison no longer says so by the time its write returns (it saw a new
// default meanwhile, or was paused between its decision and its write)
// waits for the old holder's lease like any other. In simulation session
// seed 16300180079 a candidate decided at 15.0 s, was paused, and its
// write landed at 16.9 s, after the default had flipped: it started at once
// beside the work of the holder that outranked it again.
func TestStartAtOnceNeedsTheComparisonWhenTheStealLands(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("istiod-a", "stable", 4))
	var entitled, started atomic.Bool
	entitled.Store(true)
	h.client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		entitled.Store(false) // the default flips while c's write is under way
		return false, nil, nil
	})
	c := h.start(candidateOpts{identity: "c", key: "canary", startAtOnce: true,
		stealFn: func(string) bool { return entitled.Load() },
		work:    func(ctx context.Context) error { started.Store(true); <-ctx.Done(); return nil }})
	waitFor(t, "c to take the lock", func() bool { return h.holderOrNone() == "c" })
	took := h.clock.Now()
	for h.clock.Since(took) < 3*time.Second {
		if started.Load() {
			t.Fatalf("c's work started %v after its steal landed, though it no longer outranked the holder", h.clock.Since(took))
		}
		h.steps(1, 250*time.Millisecond)
	}
	for i := 0; i < 12 && !started.Load(); i++ {
		h.steps(1, 250*time.Millisecond)
	}
	if !started.Load() {
		t.Fatal("c's work did not start once the old holder's lease had run out")
	}
	c.stop()
	<-c.done
}

// TestACandidateNamedWithAFenceThatStopsLeavesTheLockToExpire: a holder
// that took the lock by force named c before its fence, carrying the time
// left to it (fenceMillis). c stops before it has acted on that record: it
// takes its request back, finds itself named, and must not release the
// lock, which would let anyone take it and start beside the work of the
// holder the lock was taken from; it leaves it to expire. Before, it
// released it, and in simulation session seed 16300223144 a third
// candidate took the released lock and started beside istiod's work.
func TestACandidateNamedWithAFenceThatStopsLeavesTheLockToExpire(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "canary", 4))
	h.setHandover(`{"holder":"b"}`)
	c := h.start(candidateOpts{identity: "c", key: "stable", steal: true, poll: true})
	waitFor(t, "c's request", func() bool { return h.handover().Candidate == "c" })
	// b accepts, names c before its fence and carries 3 s of it; c, which
	// polls, has not read the lock since.
	named := held("c", "stable", 4)
	named.LeaderTransitions = 3
	h.writeRecord(named)
	h.setHandover(`{"holder":"c","fenceMillis":3000}`)
	c.stop()
	<-c.done
	if rec := h.record(); rec.HolderIdentity != "c" || rec.LeaseDurationSeconds != 4 {
		t.Fatalf("c released a lock named to it with a fence of 3 s to go: %+v", rec)
	}
}
