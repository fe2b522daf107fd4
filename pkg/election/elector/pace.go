package elector

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// The first attempts of all the electors that share a Pacer pass through one
// token bucket and a bounded number of slots, so that a program starting
// thousands of elections at once sends their first requests to the API
// server at a bounded rate instead of in one burst, and slows down by itself
// when the API server answers slowly (at most firstAttemptsInFlight wait for
// an answer at any time). Only attempts that may send a request wait: a
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

// Pacer paces the first attempts of the electors it is given to (see
// Config.Pacer): one token bucket and one queue of slots for all of them.
// The program creates one and passes it to every elector that should be
// paced together; package election's Group keeps one for its elections.
// It holds no goroutine and needs no stopping. It is safe for concurrent
// use. The zero value is not usable: call NewPacer.
type Pacer struct {
	tokens *rate.Limiter
	slots  *slotQueue
}

// NewPacer returns a pacer of 1000 first attempts a second, in bursts of at
// most 100, with at most 32 waiting for the API server at once.
func NewPacer() *Pacer {
	return &Pacer{
		tokens: rate.NewLimiter(firstAttemptQPS, firstAttemptBurst),
		slots:  newSlotQueue(firstAttemptsInFlight),
	}
}

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
	pacer := le.cfg.Pacer
	turn := pacer.tokens.Reserve()
	wait := time.NewTimer(turn.Delay())
	defer wait.Stop()
	if !le.awaitTurn(ctx, wait.C, nil) {
		turn.Cancel()
		return release
	}
	slot := pacer.slots.wait(le.slotPriority())
	if !le.awaitTurn(ctx, nil, slot.granted) {
		pacer.slots.leave(slot)
		return release
	}
	return pacer.slots.release
}

// awaitListed waits until the watch has listed, ctx ends or firstSyncWait
// has passed, and takes in what the watch delivered.
func (le *LeaderElector) awaitListed(ctx context.Context) {
	deadline := time.NewTimer(firstSyncWait)
	defer deadline.Stop()
	select {
	case <-ctx.Done():
	case <-deadline.C:
	case <-le.watch.healthyNow():
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
