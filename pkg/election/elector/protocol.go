package elector

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/protocol/damping"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// handoverLock is the lock's handover annotation, for a cooperative
// elector (validation checks that the lock has one).
func (le *LeaderElector) handoverLock() lockcap.HandoverLock {
	return le.cfg.Lock.(lockcap.HandoverLock)
}

// stopWithin is what the holder promises in an accepted answer: its work
// stops within StopTimeout, and the record naming the candidate is written
// within a RetryPeriod after; a holder that took the lock by force and has
// not started its work hands over at its fence instead; never more than
// the lease. Validation makes StopTimeout + RetryPeriod shorter than the
// lease.
func (le *LeaderElector) stopWithin(now time.Time) time.Duration {
	within := le.cfg.StopTimeout + le.cfg.RetryPeriod
	return min(max(within, le.fence.startAt.Sub(now)), le.cfg.LeaseDuration)
}

// namedSince is for a candidate that asked at askedAt and finds the record
// naming it: when the holder handed the lock over on its request, it may
// lead on that record alone, without writing its own first, and count its
// term from the returned time. ok is false when it must write first.
//
// The record naming this candidate was written over a version of the lock
// object that carried its request, so it was sent after the request was:
// every other candidate times its lease from a moment after askedAt, and a
// term whose renew deadline counts from askedAt ends inside that lease, as
// one counted from a renew this candidate sent itself would. The old holder
// wrote it only after its work had stopped, as it writes every handover.
// The record must also promise at least this candidate's own lease and
// carry its key (otherwise others would time a shorter lease, or see
// another key, than this candidate's renewals assume); and the request
// must be recent, so that the term has time to renew before its deadline.
// In session mode the record must name this candidate's session, which a
// record written by the old holder does not: there it writes first.
func (le *LeaderElector) namedSince(askedAt time.Time, rec *resourcelock.Record, now time.Time) (since time.Time, ok bool) {
	switch {
	case askedAt.IsZero() || now.Sub(askedAt) >= le.cfg.RenewDeadline/2:
		return time.Time{}, false
	case rec.HolderKey != le.cfg.Lock.Key() || honouredLease(*rec) < le.cfg.LeaseDuration:
		return time.Time{}, false
	case le.fence.startAt.After(now) || le.sessionMode():
		return time.Time{}, false
	}
	return askedAt, true
}

// promisedSuccessor returns the request this holder accepted and has not
// yet honoured, when the lock still names this holder and the request is
// fresh and still entitled; nil otherwise.
func (le *LeaderElector) promisedSuccessor(now time.Time) *lockmeta.Handover {
	if le.handover == nil {
		return nil
	}
	if h := le.handover.Successor(now); h != nil && h.Answer == lockmeta.AnswerAccepted {
		return h
	}
	return nil
}

// retract takes this candidate's request back when it stops contending.
// It returns whether the record names this candidate (the holder handed
// the lock to it meanwhile), in which case the caller releases the lock.
func (le *LeaderElector) retract(ctx context.Context) bool {
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
		if !le.handover.Retract(ctx) {
			return false
		}
	}
	return false
}

// termKey names one holder's term: every change of holder increments
// leaderTransitions, so a holder that regains the lock is in a new term even
// within the same second.
func termKey(rec *resourcelock.Record) string {
	return fmt.Sprintf("%s#%d", rec.HolderIdentity, rec.LeaderTransitions)
}

// Preemption tells whether a candidate currently preempts holders it
// outranks; see package internal/protocol/damping, whose steal damper
// keeps it.
type Preemption = damping.Preemption
