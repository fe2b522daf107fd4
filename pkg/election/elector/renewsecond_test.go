package elector

import (
	"context"
	"testing"
	"time"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A follower of client-go's shape (istiod) tells a renewal by a change of
// the record it encodes, with times in whole seconds, whatever the lock
// stores: a renew in the same second as the previous one leaves the record
// as it was, and such a follower times the lease from the earlier renew.
// The holder's renew deadline must end in time for it: with a
// RenewDeadline of 2 s or more it counts from the earlier renew; a shorter
// one ends no later than StopTimeout before the lease from the earlier
// renew runs out. Before, a ConfigMap's deadline counted from the invisible
// renew (classic seed 990252's shape), and a Lease's always did: at ttl 2 s
// an istiod-shaped follower took a Lease 84 ms before the holder's stop
// budget ended (classic seed 1562958868).
func TestARenewWithinTheSecondMovesTheDeadlineOnlyAsFarAsFollowersSee(t *testing.T) {
	ttl4 := Config{LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}
	ttl2 := Config{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 500 * time.Millisecond,
		StopTimeout: 400 * time.Millisecond}
	ttl2SlowStop := ttl2
	ttl2SlowStop.StopTimeout = time.Second
	slowStop := ttl4
	slowStop.StopTimeout = 2500 * time.Millisecond
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name   string
		leases bool
		timing Config
		// the deadline counts from t0 + these, after the renew at 0.9 s
		// (same second as the acquisition at 0.1 s) and at 1.2 s (the next)
		sameSecond, nextSecond time.Duration
	}{
		{"ConfigMap ttl 4s: from the first renew of the second", false, ttl4, ms(100), ms(1200)},
		{"Lease ttl 4s: as a ConfigMap", true, ttl4, ms(100), ms(1200)},
		// 0.1 s + LeaseDuration - StopTimeout - RenewDeadline = 0.7 s
		{"Lease ttl 2s: StopTimeout before the lease from the first renew of the second", true, ttl2, ms(700), ms(1200)},
		{"ConfigMap ttl 2s: as a Lease", false, ttl2, ms(700), ms(1200)},
		// LeaseDuration - StopTimeout = 1 s leaves no second in which a
		// renew is sure to be seen: the documented limit
		{"Lease ttl 2s, StopTimeout 1s: from the write", true, ttl2SlowStop, ms(900), ms(1200)},
		// a stop that takes longer than LeaseDuration - RenewDeadline ends
		// the term early enough for it, from the first renew of a second
		// on (1.2 s + 4 - 2.5 - 2 = 0.7 s); the deadline never moves back,
		// so until then it counts from the acquisition
		{"ConfigMap ttl 4s, StopTimeout 2.5s: early enough for the stop", false, slowStop, ms(100), ms(700)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.leases = tc.leases
			le := h.timedElector(tc.timing)
			h.clock.SetTime(t0.Add(100 * time.Millisecond))
			mustAttempt(t, le, false, acquired)
			le.loop.lastRenew = h.clock.Now()
			for _, step := range []struct {
				at, want time.Duration
			}{{ms(900), tc.sameSecond}, {ms(1200), tc.nextSecond}} {
				h.clock.SetTime(t0.Add(step.at))
				if end := le.renewOnce(context.Background()); end != nil {
					t.Fatalf("renew at %v ended the term: %+v", step.at, end)
				}
				if got := le.loop.lastRenew.Sub(t0); got != step.want {
					t.Fatalf("after the renew at %v the deadline counts from t0%+v, want t0%+v", step.at, got, step.want)
				}
			}
		})
	}
}

// timedElector is a polling candidate on the harness's kind of lock with
// the timing of c.
func (h *harness) timedElector(c Config) *LeaderElector {
	h.t.Helper()
	var (
		lock resourcelock.Interface
		err  error
	)
	if h.leases {
		lock, err = resourcelock.NewLeaseLock(h.client.CoordinationV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	} else {
		lock, err = resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	}
	if err != nil {
		h.t.Fatal(err)
	}
	c.Name, c.Lock, c.Clock = lockName, lock, h.clock
	c.Callbacks = Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })}
	le, err := New(c)
	if err != nil {
		h.t.Fatal(err)
	}
	return le
}

// A holder at ttl 2 s with the default StopTimeout (0.75 s) has its
// deadline held to 1.25 s after the first renew of a second: its renews,
// a RetryPeriod apart, each second write in a later second, keep it in
// its term with no write more than a renew every RetryPeriod, wherever in
// a second the term began.
func TestAHolderWhoseDeadlineFollowsTheFirstRenewOfASecondKeepsItsTerm(t *testing.T) {
	for _, start := range []time.Duration{0, 300 * time.Millisecond, 900 * time.Millisecond} {
		t.Run(start.String(), func(t *testing.T) {
			h := newLeaseHarness(t)
			h.clock.SetTime(t0.Add(start))
			le := h.timedElector(Config{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 500 * time.Millisecond})
			h.run(le)
			waitFor(t, "a to lead", le.IsLeader)
			h.parkedSteps(200, 50*time.Millisecond, 1) // 10 s, each step once the leader waits for its renew
			if !le.IsLeader() {
				t.Fatal("the holder lost its term while every renew succeeded")
			}
			updates := 0
			for _, v := range h.verbs() {
				if v == "update leases" {
					updates++
				}
			}
			t.Logf("%d updates in 10 s", updates)
			if updates > 20 {
				t.Fatalf("%d updates in 10 s, want a renew every RetryPeriod (20) at most", updates)
			}
		})
	}
}
