package elector

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/protocol/damping"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// namedSince is for a candidate that asked at askedAt and finds the record
// naming it: when the holder handed the lock over on its request, it may
// lead on that record alone (see handover.Role.NamedSince), unless its
// fence has not passed or it is in session mode.
func (le *LeaderElector) namedSince(askedAt time.Time, rec *resourcelock.Record, now time.Time) (since time.Time, ok bool) {
	return le.proto.handover.NamedSince(askedAt, rec, honouredLease(*rec), now, le.fence.startAt.After(now) || le.proto.session.On())
}

// retract takes this candidate's request back when it stops contending.
// It returns whether the record names this candidate (the holder handed
// the lock to it meanwhile), in which case the caller releases the lock.
func (le *LeaderElector) retract() bool {
	ctx, cancel := context.WithTimeout(context.Background(), le.cfg.RenewDeadline)
	defer cancel()
	for i := 0; i < releaseAttempts; i++ {
		rec, raw, err := le.get(ctx)
		if err != nil {
			le.log.Warn("could not read the lock to withdraw", zap.Error(err))
			return false
		}
		le.observe(rec, raw, le.clock.Now())
		if rec.HolderIdentity == le.cfg.Lock.Identity() {
			return true
		}
		if !le.proto.handover.Retract(ctx) {
			return false
		}
	}
	return false
}

// Preemption tells whether a candidate currently preempts holders it
// outranks; see package internal/protocol/damping, whose steal damper
// keeps it.
type Preemption = damping.Preemption
