package elector

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A candidate whose term ended because its renewals failed may take its
// own record back once the API answers again. A ConfigMap record keeps
// whole seconds: when the candidate's wall clock has stepped back into the
// second of its last renew, writing the same term again leaves the stored
// record exactly as it was. A follower then sees no change, times the lease
// from the old term's renew it saw, and takes the lock beside the new
// term's work. The re-take is a new term instead (transitions one up), a
// record the follower sees change.
func TestRetakenRecordIsSeenToChangeDespiteAClockSteppedBack(t *testing.T) {
	h := newHarness(t) // h.clock is the follower's clock
	wall := clocktesting.NewFakeClock(t0.Add(300 * time.Millisecond))
	var failing atomic.Bool
	h.client.PrependReactor("*", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, apierrors.NewInternalError(errors.New("injected"))
		}
		return false, nil, nil
	})
	lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var terms atomic.Int32
	a, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Clock: wall,
		Callbacks: Callbacks{OnStartedLeading: func(ctx context.Context) error {
			terms.Add(1)
			<-ctx.Done()
			return nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := h.elector("b", "", nil, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := func() chan struct{} {
		done := make(chan struct{})
		go func() { defer close(done); a.Run(ctx) }()
		return done
	}

	first := run()
	waitFor(t, "a's first term", func() bool { return terms.Load() == 1 })
	mustAttempt(t, b, false, heldByOther) // b sees a's record (renewed 03:04:05) at t0
	taken := h.record()

	// The API fails for a until its renew deadline has passed and its term
	// has ended.
	failing.Store(true)
	for done := false; !done; {
		select {
		case <-first:
			done = true
		case <-time.After(time.Millisecond):
			if wall.HasWaiters() {
				wall.Step(250 * time.Millisecond)
			}
		}
	}
	if a.IsLeader() {
		t.Fatal("a still leads after its renew deadline passed")
	}
	failing.Store(false)

	// a's wall clock steps back into the second of its last renew, and a
	// contends again: the record still names it.
	wall.SetTime(t0.Add(800 * time.Millisecond))
	second := run()
	waitFor(t, "a's second term", func() bool { return terms.Load() == 2 })
	h.clock.Step(3 * time.Second)
	mustAttempt(t, b, false, heldByOther) // b reads the re-taken record
	if _, seen := b.Observed(); !seen.Equal(h.clock.Now()) {
		t.Fatalf("b saw the re-taken record as unchanged (last change seen at %v, now %v)", seen, h.clock.Now())
	}
	// A lease after b saw the first term's record, well within a lease of
	// the re-take: a works, so b must wait.
	h.clock.Step(1500 * time.Millisecond)
	mustAttempt(t, b, false, heldByOther)
	if !a.IsLeader() {
		t.Fatal("a stopped leading")
	}
	// The record of the re-take is a new term of a's.
	if retaken := h.record(); retaken.HolderIdentity != "a" || retaken.LeaderTransitions != taken.LeaderTransitions+1 {
		t.Fatalf("re-taken record = %+v, want a's with transitions %d (first term: %+v)", retaken, taken.LeaderTransitions+1, taken)
	}
	cancel()
	<-second
}
