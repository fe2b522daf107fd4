package elector

import (
	"context"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A forced steal from a holder renewing through its session fences the
// thief's start at a lease after the steal and at RenewDeadline +
// StopTimeout at least: the holder's term runs on for up to RenewDeadline
// when its watch lags behind the steal (the lag holds back its echoes too),
// and its work then has StopTimeout to stop, which validation bounds only
// by LeaseDuration - RetryPeriod. With LeaseDuration 10s, RenewDeadline 8s,
// RetryPeriod 2s and the default StopTimeout of 4s, the work may run until
// 12s after the steal; a fence of one lease started the thief at 10s.
// (Package election sets RenewDeadline to ttl/2 and clamps StopTimeout,
// so only direct users of this package could reach it.)
func TestForcedStealFromASessionHolderCoversItsStopTimeout(t *testing.T) {
	h := newLeaseHarness(t)
	h.writeRecord(held("a", "stable", 1))
	h.writeMark(lockmeta.SessionMark{Holder: "a", Session: "s/1", Process: "s/1"})
	s := &fakeSession{ref: "s/2", current: true, known: true, alive: map[string]time.Time{}}
	lock, err := resourcelock.NewLeaseLock(h.client.CoordinationV1(), ns, lockName, resourcelock.Config{Identity: "b"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 10 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second,
		Callbacks: Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })},
		Watch:     true, Session: inSession(lock, 2*time.Second, s), Clock: h.clock,
		KeyComparison: func(string) bool { return true },
	})
	if err != nil {
		t.Fatalf("the configuration is refused: %v", err)
	}
	steal := t0.Add(time.Second)
	h.clock.SetTime(steal)
	mustAttempt(t, le, false, acquired)
	termEnd := steal.Add(le.cfg.RenewDeadline - le.cfg.RetryPeriod/4)
	if want := termEnd.Add(le.cfg.StopTimeout); le.fence.startAt.Before(want) {
		t.Errorf("work may start at %v, while the holder's work may still be stopping within its StopTimeout (%v) until %v",
			le.fence.startAt, le.cfg.StopTimeout, want)
	}
}
