package elector

import (
	"context"
	"hash/fnv"
	"time"
)

// firstSyncWait bounds how long a starting elector waits for the shared
// watch's first list before its first attempt.
const firstSyncWait = time.Second

// Pacer paces the first attempts of the electors it is given to (see
// Config.Pacer; package internal/pacing implements it): a program starting
// thousands of elections at once sends their first requests at a bounded
// rate, and a bounded number of them wait for the API server at once. Only
// attempts that may send a request wait: a follower whose watch shows a
// live holder decides from the watch's cache, and one that learns of such
// a holder while it waits gives its turn back. It must be safe for
// concurrent use.
type Pacer interface {
	// Built reports whether the pacer was built by its constructor
	// (NewPacer); a zero value is refused by validation.
	Built() bool
	// Reserve takes a token: wait delay before the attempt, or cancel to
	// give the token back.
	Reserve() (delay time.Duration, cancel func())
	// Wait joins the queue of slots with priority prio, lowest first:
	// granted is closed once a slot is held; leave gives the place up, or
	// the slot back once granted, and is called exactly once.
	Wait(prio uint64) (granted <-chan struct{}, leave func())
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
	if le.loop.paced {
		return release
	}
	le.loop.paced = true
	if le.watch != nil {
		le.awaitListed(ctx)
	}
	pacer := le.cfg.Pacer
	if pacer == nil {
		return release // a pacer of its own would never make it wait
	}
	delay, cancel := pacer.Reserve()
	wait := time.NewTimer(delay)
	defer wait.Stop()
	if !le.awaitTurn(ctx, wait.C, nil) {
		cancel()
		return release
	}
	granted, leave := pacer.Wait(le.slotPriority())
	if !le.awaitTurn(ctx, nil, granted) {
		leave()
		return release
	}
	return leave
}

// slotPriority orders le's first attempt among those of its process: a hash
// of its identity and lock, so the order differs from one process (and
// identity) to the next.
func (le *LeaderElector) slotPriority() uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(le.cfg.Lock.Identity() + "\x00" + le.cfg.Lock.Describe()))
	return h.Sum64()
}

// awaitListed waits until the watch has listed, ctx ends or firstSyncWait
// has passed, and takes in what the watch delivered.
func (le *LeaderElector) awaitListed(ctx context.Context) {
	deadline := time.NewTimer(firstSyncWait)
	defer deadline.Stop()
	select {
	case <-ctx.Done():
	case <-deadline.C:
	case <-le.watch.HealthyNow():
	}
	le.watch.ingest()
}

// awaitTurn waits until ready fires or a slot is granted (true), taking in
// what the watch delivers meanwhile; it gives up (false) when ctx ends or
// the watch shows the lock held by someone this candidate may not take it
// from. A nil ready or granted is not waited for.
func (le *LeaderElector) awaitTurn(ctx context.Context, ready <-chan time.Time, granted <-chan struct{}) bool {
	for {
		if le.watch != nil && le.watch.Healthy() && !le.worthTrying() {
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
