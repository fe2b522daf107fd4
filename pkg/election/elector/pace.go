package elector

import (
	"context"
	"reflect"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The first attempts of all the electors of a process pass through one token
// bucket and a bounded number of slots, so that a process starting thousands
// of elections at once sends their first requests to the API server at a
// bounded rate instead of in one burst, and slows down by itself when the
// API server answers slowly (at most firstAttemptsInFlight wait for an
// answer at any time). Only attempts that may send a request wait: a
// follower whose watch shows a live holder decides from the watch's cache,
// and one that learns of such a holder while it waits gives its turn back.
// Attempts waiting for a slot are served in an order that differs from one
// candidate identity to the next (see slotQueue), so that replicas starting
// the same elections together create different lock objects first rather
// than all racing for the same one.
const (
	firstAttemptQPS       = 1000
	firstAttemptBurst     = 100
	firstAttemptsInFlight = 32
	// firstSyncWait bounds how long a starting elector waits for the shared
	// watch's first list before its first attempt.
	firstSyncWait = time.Second
)

var (
	firstAttempts     = rate.NewLimiter(firstAttemptQPS, firstAttemptBurst)
	firstAttemptSlots = newSlotQueue(firstAttemptsInFlight)
)

// tryFirst makes the first attempt of a Run: the elector's very first one
// is paced (see paceFirstAttempt). It reports whether the lock was taken.
func (le *LeaderElector) tryFirst(ctx context.Context) bool {
	release := le.paceFirstAttempt(ctx)
	defer release()
	if ctx.Err() != nil {
		return false
	}
	return le.tryAcquire(ctx)
}

// paceFirstAttempt runs once per elector, before its first attempt. With a
// watch it waits (at most firstSyncWait) for the shared watch's first list,
// so that the attempt decides from it; then it waits for a token and a slot,
// unless the watch shows the lock held by someone this candidate may not
// take it from. The returned function gives the slot back, if one was taken.
func (le *LeaderElector) paceFirstAttempt(ctx context.Context) (release func()) {
	release = func() {}
	if le.paced {
		return release
	}
	le.paced = true
	if le.watch != nil {
		le.awaitListed(ctx)
	}
	turn := firstAttempts.Reserve()
	wait := time.NewTimer(turn.Delay())
	defer wait.Stop()
	if !le.awaitTurn(ctx, wait.C, nil) {
		turn.Cancel()
		return release
	}
	slot := firstAttemptSlots.wait(le.slotPriority())
	if !le.awaitTurn(ctx, nil, slot.granted) {
		firstAttemptSlots.leave(slot)
		return release
	}
	return firstAttemptSlots.release
}

// awaitListed waits until the watch has listed, ctx ends or firstSyncWait
// has passed, and takes in what the watch delivered.
func (le *LeaderElector) awaitListed(ctx context.Context) {
	deadline := time.NewTimer(firstSyncWait)
	defer deadline.Stop()
	select {
	case <-ctx.Done():
	case <-deadline.C:
	case <-le.watch.listed:
	}
	le.watch.ingest()
}

// awaitTurn waits until ready fires or a slot is granted (true), taking in
// what the watch delivers meanwhile; it gives up (false) when ctx ends or
// the watch shows the lock held by someone this candidate may not take it
// from. A nil ready or granted is not waited for.
func (le *LeaderElector) awaitTurn(ctx context.Context, ready <-chan time.Time, granted <-chan struct{}) bool {
	for {
		if le.watch != nil && le.watch.healthy() && !le.worthTrying() {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-ready:
			return true
		case <-granted:
			return true
		case <-le.watchEvents():
			le.watch.ingest()
		}
	}
}

// The first renewals of terms that begin together are spread over the
// retry period. A process that starts a thousand elections within a second
// would otherwise renew them in that same second of every period, for as
// long as the terms last: a burst that makes the API server close the
// watches that follow it (their buffers overflow) and re-open them. Each
// term takes a turn from a process-wide bucket per retry period that grants
// renewSpread turns per period, one at a time, and renews that much earlier
// (modulo the period): a lone term, or terms that begin apart, renew a
// whole period after they began, as before; a burst of them renews spread
// evenly. Renewing early is always safe.
const renewSpread = 100

// The buckets are kept per clock (a program has one; a test or a
// simulation one per world) and run on that clock.
var renewSpreads = struct {
	mu      sync.Mutex
	buckets map[spreadKey]*rate.Limiter
}{buckets: map[spreadKey]*rate.Limiter{}}

type spreadKey struct {
	clock  any
	period time.Duration
}

// firstRenew is the wait before the term's first renew, at most wait (see
// renewSpread).
func (le *LeaderElector) firstRenew(wait time.Duration) time.Duration {
	period := le.cfg.RetryPeriod
	key := spreadKey{le.clock, period}
	if !mapKeyable(le.clock) || period <= 0 {
		return wait
	}
	renewSpreads.mu.Lock()
	bucket := renewSpreads.buckets[key]
	if bucket == nil {
		bucket = rate.NewLimiter(rate.Limit(float64(renewSpread)/period.Seconds()), 1)
		renewSpreads.buckets[key] = bucket
	}
	now := le.clock.Now()
	early := bucket.ReserveN(now, 1).DelayFrom(now) % period
	renewSpreads.mu.Unlock()
	return max(wait-early, min(wait, time.Millisecond))
}

// mapKeyable reports whether v can be a map key.
func mapKeyable(v any) bool { return v != nil && reflect.TypeOf(v).Comparable() }
