package elector

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/meshd-io/meshd/internal/protocol/coordination"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// holdLease writes a Lease whose record names holder with a lease of 4s
// and transitions, renewed now, in the object with the given uid (created
// when missing, as the API server would name it).
func (h *harness) holdLease(holder string, transitions int, uid types.UID) {
	h.t.Helper()
	h.coordinate(func(l *coordinationv1.Lease) {
		if l.UID == "" {
			l.UID = uid
		}
		now := metav1.NewTime(h.clock.Now())
		resourcelock.ApplyRecordToLease(resourcelock.Record{HolderIdentity: holder, HolderKey: "stable",
			LeaseDurationSeconds: 4, AcquireTime: now, RenewTime: now, LeaderTransitions: transitions}, l)
		l.Spec.Strategy = ptr.To(coordinationv1.CoordinatedLeaseStrategy("meshd.io/prioritized"))
	})
}

// wipeLease deletes the Lease and creates it again without a record, as
// kubectl replace --force does, with a new uid.
func (h *harness) wipeLease(uid types.UID) {
	h.t.Helper()
	h.leases = true
	h.deleteLock()
	h.coordinate(func(l *coordinationv1.Lease) { l.UID = uid })
}

// coordinatedCandidate is a coordinated candidate "a" on the Lease whose
// work sets started.
func (h *harness) coordinatedCandidate(watch bool, started *atomic.Bool) *LeaderElector {
	h.t.Helper()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, lockName, h.client, resourcelock.Config{Identity: "a", Key: "stable"})
	if err != nil {
		h.t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks: Callbacks{OnStartedLeading: func(ctx context.Context) error {
			started.Store(true)
			<-ctx.Done()
			return nil
		}},
		Coordination: coordination.New(coordination.Config{LeaseDuration: 4 * time.Second}),
		Watch:        watch,
		Clock:        h.clock,
		Logger:       zaptest.NewLogger(h.t).Named("a"),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return le
}

// A coordinated candidate that saw "b" hold the lock, then saw the lock
// object deleted and re-created without a record, is named holder by a
// coordinator that never saw b's record. b may still work: a holds the
// lock at once but starts its work only when b's lease, as a saw it
// renewed, has run out. The record counts one transition more than b's,
// as a handover would; only the wipe in between tells them apart.
func TestCoordinatedCandidateNamedOverAWipedHolderWaitsOutItsLease(t *testing.T) {
	h := newHarness(t)
	h.holdLease("b", 0, "")
	var started atomic.Bool
	a := h.run(h.coordinatedCandidate(true, &started))
	waitFor(t, "a to see b hold the lock", func() bool { return a.le.GetLeader() == "b" })
	leaseEnd := t0.Add(4 * time.Second) // b's renew as a saw it, plus its lease

	h.clock.Step(time.Second)
	h.wipeLease("")
	time.Sleep(50 * time.Millisecond) // let a take the deletion and the empty object in
	h.holdLease("a", 1, "")           // the coordinator's assignment
	waitFor(t, "a to hold the lock", a.le.IsLeader)

	h.stepUntil(100*time.Millisecond, func() bool { return started.Load() || !h.clock.Now().Before(leaseEnd) })
	if started.Load() && h.clock.Now().Before(leaseEnd) {
		t.Fatalf("a started its work at %v, before b's lease ended at %v", h.clock.Now().Sub(t0), leaseEnd.Sub(t0))
	}
	h.stepUntil(100*time.Millisecond, started.Load)
	if got := resourcelock.LeaseToRecord(h.lease()).HolderIdentity; got != "a" {
		t.Fatalf("holder when a started = %q", got)
	}
}

// A polling candidate cannot see the deletion between two reads; the
// lock object's new uid tells it that the record naming it was not
// written over b's.
func TestPollingCandidateNamedInARecreatedObjectWaitsOutTheHolderLease(t *testing.T) {
	h := newHarness(t)
	h.holdLease("b", 0, "uid-1")
	var started atomic.Bool
	le := h.coordinatedCandidate(false, &started)
	mustAttempt(t, le, false, heldByOther) // a sees b at t0

	h.clock.Step(time.Second)
	h.wipeLease("uid-2")
	h.holdLease("a", 1, "") // between two reads of a
	mustAttempt(t, le, false, acquired)
	if want := t0.Add(4 * time.Second); !le.fence.startAt.Equal(want) {
		t.Fatalf("work of a starts at %v, want at the end of b's lease %v", le.fence.startAt.Sub(t0), want.Sub(t0))
	}
}

// A handover, written by the holder over its own record in the same
// object, proves that the holder's work has stopped: the named candidate
// starts at once.
func TestCandidateHandedTheLockByItsHolderStartsAtOnce(t *testing.T) {
	h := newHarness(t)
	h.holdLease("b", 0, "uid-1")
	var started atomic.Bool
	le := h.coordinatedCandidate(false, &started)
	mustAttempt(t, le, false, heldByOther)

	h.clock.Step(time.Second)
	h.holdLease("a", 1, "") // b names a in the same object
	mustAttempt(t, le, false, acquired)
	if !le.fence.startAt.IsZero() {
		t.Fatalf("a handed the lock by its holder waits until %v", le.fence.startAt.Sub(t0))
	}
}
