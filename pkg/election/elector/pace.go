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
	// Turn waits for this elector's turn, served by prio (lowest first),
	// and gives up when ctx ends or giveUp, asked at the start and at each
	// of wakeups, reports true. release gives the turn back after the
	// attempt; it is called exactly once.
	Turn(ctx context.Context, prio uint64, wakeups <-chan struct{}, giveUp func() bool) (release func())
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
// so that the attempt decides from it; then it waits for its turn, unless
// the watch shows the lock held by someone this candidate may not take it
// from. The returned function gives the turn back.
func (le *LeaderElector) paceFirstAttempt(ctx context.Context) (release func()) {
	if le.loop.paced {
		return func() {}
	}
	le.loop.paced = true
	if le.watch != nil {
		le.awaitListed(ctx)
	}
	if le.cfg.Pacer == nil {
		return func() {} // a pacer of its own would never make it wait
	}
	return le.cfg.Pacer.Turn(ctx, le.slotPriority(), le.watchEvents(), func() bool {
		if le.watch == nil {
			return false
		}
		le.watch.ingest()
		return le.watch.Healthy() && !le.worthTrying()
	})
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
