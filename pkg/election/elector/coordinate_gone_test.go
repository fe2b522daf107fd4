package elector

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/protocol/coordination"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A coordinated holder decides to hand over to the preferred holder, stops
// its work, and by then the preferred holder has gone: it releases the lock
// instead of naming a candidate that will never take it. Before, the
// preference was not checked again, and the election went a lease without
// a leader.
func TestPreferredHolderThatLeftIsNotHandedTheLock(t *testing.T) {
	h := newHarness(t)
	var alive atomic.Bool
	alive.Store(true)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, lockName, h.client, resourcelock.Config{Identity: "a", Key: "stable"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:    Callbacks{OnStartedLeading: waitDone},
		Coordination: coordination.New(coordination.Config{Live: func(string) bool { return alive.Load() }, LeaseDuration: 4 * time.Second}),
		Clock:        h.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.assign("a", "stable")
	mustAttempt(t, le, false, acquired)
	h.coordinate(func(l *coordinationv1.Lease) {
		l.Spec.PreferredHolder = ptr.To("b")
		l.Annotations[lockmeta.LeasePreferredHolderKeyAnnotation] = "stable"
	})
	mustAttempt(t, le, true, handOff)
	if le.loop.handTo == nil || le.loop.handTo.Candidate != "b" {
		t.Fatalf("hand over to %+v, want b", le.loop.handTo)
	}
	alive.Store(false) // b's candidacy lapsed while a's work stopped
	le.finish(termEnd{stillHeld: true, handTo: le.loop.handTo})
	if rec := resourcelock.LeaseToRecord(h.lease()); rec.HolderIdentity != "" {
		t.Fatalf("record after the preferred holder left = %+v, want released", rec)
	}
}
