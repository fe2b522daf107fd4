package elector

import (
	"context"
	"time"

	"github.com/meshd-io/meshd/internal/ownstack"
)

// firstSyncWait bounds how long a Run waits for its watch to be healthy
// before its first attempt.
const firstSyncWait = time.Second

// tryFirst makes the first attempt of a Run and returns the wait after it
// (tookLock when it took the lock). Every Run subscribes to the watch anew,
// and what the hub hands a joining subscriber is its cache, which says
// nothing of whether the watch works; so with a watch, every Run first
// waits (at most firstSyncWait) for it to be healthy, decides from what it
// delivered, and lets better candidates go first when it shows the lock
// released, as it does for a release the watch delivers while it waits
// (see acquire). The elector's very first attempt is also paced (see
// paceFirstAttempt). The waits, which last while thousands of elections
// start together, are the caller's: only the decisions and the attempt run
// on goroutines of their own (see the package doc, The stack of a waiting
// candidate), so a starting election holds one goroutine, not two.
func (le *LeaderElector) tryFirst(ctx context.Context) time.Duration {
	if le.watch != nil {
		le.awaitHealthy(ctx)
		if ownstack.Call(func() bool { le.watch.ingest(); return le.watch.Healthy() && le.yieldOnRelease(le.clock.Now()) }) {
			return ownstack.Call(func() time.Duration { return le.waitAfter(false) })
		}
	}
	defer le.paceFirstAttempt(ctx)() // gives the turn back
	return ownstack.Call(func() time.Duration { return le.waitAfter(ctx.Err() == nil && le.tryAcquire(ctx)) })
}

// paceFirstAttempt runs before every first attempt of a Run; for the
// elector's very first one (see pacing.First) it waits for its turn, unless
// the watch shows the lock held by someone this candidate may not take it
// from. The returned function gives the turn back.
func (le *LeaderElector) paceFirstAttempt(ctx context.Context) (release func()) {
	return le.proto.pacer.Turn(ctx, le.cfg.Lock.Identity()+"\x00"+le.cfg.Lock.Describe(), le.watchEvents(), func() bool {
		return le.watch != nil && ownstack.Call(func() bool { le.watch.ingest(); return le.watch.Healthy() && !le.worthTrying() })
	})
}

// awaitHealthy waits until the watch is healthy, ctx ends or firstSyncWait
// has passed.
func (le *LeaderElector) awaitHealthy(ctx context.Context) {
	deadline := time.NewTimer(firstSyncWait)
	defer deadline.Stop()
	select {
	case <-ctx.Done():
	case <-deadline.C:
	case <-le.watch.HealthyNow():
	}
}

// yieldOnRelease decides, for the record last observed, whether this
// candidate tries at once (false) or lets better candidates go first
// (true) because the record shows the lock released; see package
// internal/protocol/yield.
func (le *LeaderElector) yieldOnRelease(now time.Time) bool {
	rec, _ := le.Observed()
	return le.proto.yield.OnRelease(rec.HolderIdentity == "" && !noRecord(&rec), now)
}
