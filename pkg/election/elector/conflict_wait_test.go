package elector

import (
	"math/rand"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// TestAConflictDoesNotDelayAnEarlierWakeUp: a watching follower whose
// write conflicted tries again within a RetryPeriod, but that bound must
// not replace a wake-up that comes sooner. Here the holder it lost to
// renews every RetryPeriod, so the follower makes no attempt for a while,
// and then names a successor that has gone with the brief lease of one
// RetryPeriod: the follower takes the lock when that second runs out, not
// a jittered RetryPeriod (1.6 s here) on.
func TestAConflictDoesNotDelayAnEarlierWakeUp(t *testing.T) {
	synctest.Test(t, testAConflictDoesNotDelayAnEarlierWakeUp)
}

func testAConflictDoesNotDelayAnEarlierWakeUp(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(resourcelock.Record{LeaseDurationSeconds: 1, LeaderTransitions: 1}) // released
	conflicts := h.conflictOnce()
	lock, err := resourcelock.New(resourcelock.ConfigMapsResourceLock, ns, lockName, h.client, resourcelock.Config{Identity: "c", Key: "canary"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:       Callbacks{OnStartedLeading: waitDone},
		ReleaseOnCancel: true, Watch: true, Clock: h.clock,
		Rand:   rand.New(fixedSource{}), // poll = 1.6 s
		Logger: zaptest.NewLogger(t).Named("c"),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := h.run(le)
	waitFor(t, "c's write to conflict", func() bool { return conflicts.Load() == 1 })
	// The write c lost to: h's record, then h renews every second.
	hrec := held("h", "stable", 4)
	hrec.LeaderTransitions = 2
	for i := 0; i < 8; i++ {
		h.renewAs(hrec)
		renewed := h.clock.Now().Truncate(time.Second)
		waitFor(t, "c to see h's renewal", func() bool {
			rec, _ := c.le.Observed()
			return rec.HolderIdentity == "h" && rec.RenewTime.Time.Equal(renewed)
		})
		h.steps(4, 250*time.Millisecond)
	}
	// h hands over to s, which asked a while ago and has gone, with a brief lease.
	succ := held("s", "stable", 1)
	succ.LeaderTransitions = 3
	succ.AcquireTime.Time, succ.RenewTime.Time = h.clock.Now(), h.clock.Now()
	h.writeRecord(succ)
	waitFor(t, "c to see s", func() bool { return c.le.GetLeader() == "s" })
	start := h.clock.Now()
	for !c.le.IsLeader() && h.clock.Since(start) < 3*time.Second {
		h.steps(1, 250*time.Millisecond)
		time.Sleep(20 * time.Millisecond)
	}
	took := h.clock.Since(start)
	t.Logf("c led %v after s's brief 1 s lease was written", took)
	if !c.le.IsLeader() || took > 1250*time.Millisecond {
		t.Fatalf("c took the lock %v after the brief 1 s lease of a gone successor was written, want by 1.25 s (its wake-up at the lease end was replaced by a jittered RetryPeriod of 1.6 s)", took)
	}
}

// A watching follower whose write conflicted looks again within a
// RetryPeriod only until the watch delivers a version: that version is the
// write it lost to, or a later one, and from then on it waits by what it
// sees. Kept, the bound woke every candidate that lost the first race for
// a lock a RetryPeriod later for nothing (two of three replicas for each
// of a thousand elections at once, in the scale benchmark).
func TestADeliveredVersionExplainsAConflict(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(resourcelock.Record{LeaseDurationSeconds: 4, LeaderTransitions: 1}) // released
	lock, err := resourcelock.New(resourcelock.ConfigMapsResourceLock, ns, lockName, h.client, resourcelock.Config{Identity: "c", Key: "canary"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks: Callbacks{OnStartedLeading: waitDone},
		Watch:     true, Clock: h.clock,
		Rand: rand.New(fixedSource{}), // poll = 1.6 s
	})
	if err != nil {
		t.Fatal(err)
	}
	le.watch.MarkHealthy(true)
	le.watch.Deliver(h.lockObject(), false)
	le.watch.ingest()
	conflicts := h.conflictOnce()
	mustAttempt(t, le, false, heldByOther) // from the watch's copy: the write conflicts
	if conflicts.Load() != 1 {
		t.Fatal("the attempt did not meet the injected conflict")
	}
	const poll = 1600 * time.Millisecond
	if w := le.followerWait(); w > poll {
		t.Fatalf("after a conflict nothing explains, the follower waits %v; want at most the poll of %v", w, poll)
	}
	// The record it lost to arrives: h holds the lock for 4 s.
	won := held("h", "stable", 4)
	won.AcquireTime.Time, won.RenewTime.Time = h.clock.Now(), h.clock.Now()
	h.writeRecord(won)
	le.watch.Deliver(h.lockObject(), false)
	if !le.watch.ingest() {
		t.Fatal("the delivery changed nothing")
	}
	if w := le.followerWait(); w < 4*time.Second {
		t.Errorf("with the winner's record delivered, the follower waits %v; want h's lease of 4 s", w)
	}
}
