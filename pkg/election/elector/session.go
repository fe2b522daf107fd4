package elector

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// markSession sets the session mark that goes with a write of r, and notes
// the watch's Epoch before the write (session mode needs a watch).
func (le *LeaderElector) markSession(r resourcelock.Record) {
	if le.proto.session.Mark(r.HolderIdentity) {
		le.loop.writeEpoch = le.watch.Epoch()
	}
}

// aliveUntil is until when the observed holder (another candidate) is
// alive: recordEnd, when its record's lease runs out, or later while it is
// alive by its session. The session is the one named when the record was
// observed: a lock object deleted or re-created since (which is not a
// release) keeps it. The echo of this process's own heartbeat that settles
// a session judged over wakes the elector (Trigger).
func (le *LeaderElector) aliveUntil(now, recordEnd time.Time) time.Time {
	o := le.seen()
	if alive := le.proto.session.HolderUntil(now, recordEnd, o.record.HolderIdentity, o.session, le.Trigger); alive.After(recordEnd) {
		return alive
	}
	return recordEnd
}

// renewedBySession credits the session's heartbeat to this term when the
// lock names the session, and reports whether the renew due now can be
// left to it. It cannot when the session is not current, when a request
// waits for an answer (or a refusal would now be an acceptance), when the
// watch has broken since the holder last wrote its record (it may still be
// catching up) and has not handed that write over since, or when the lock's Pod mark is pending: the holder then
// writes its record, which also shows it whether someone took the lock
// meanwhile.
func (le *LeaderElector) renewedBySession() bool {
	sent, current, ok := le.proto.session.Heartbeat(le.GetLeader())
	if !ok {
		return false
	}
	if sent.After(le.loop.lastRenew) {
		le.loop.lastRenew = sent
		le.mu.Lock()
		le.state.sessionRenew = sent
		le.mu.Unlock()
	}
	return current && le.watch.Covers(le.loop.watchEpoch, le.loop.wroteVersion) && !le.proto.handover.ToAnswer(le.clock.Now()) &&
		le.proto.coord.Preferred() == nil && !lockcap.PodMarkPending(le.cfg.Lock)
}

// SessionFallback reports whether this candidate, in session mode, renews
// its record itself because it saw a holder that does not use sessions.
func (le *LeaderElector) SessionFallback() bool { return le.proto.session.Mixed() }

// leaveSession is how a holder in session mode leaves a lock to expire:
// its session outlives this term (the process may lead other elections),
// so it writes its record once more with a mark that names no session, and
// followers wait a lease from that write, as they would for a holder
// without sessions. Nothing is written when the lock is not held through
// the session. If the write fails, followers keep waiting for as long as
// the session lives (a limit stated in docs/sessions.md).
func (le *LeaderElector) leaveSession() {
	if !le.proto.session.HeldThrough(le.GetLeader()) {
		return
	}
	prev, _ := le.Observed()
	ctx, cancel := context.WithTimeout(context.Background(), le.cfg.RenewDeadline)
	defer cancel()
	now := le.clock.Now()
	rec := le.desired(now)
	le.continueTerm(&rec, prev, true, now)
	le.proto.session.Detach()
	le.cfg.Metrics.Request(le.cfg.Name, "update")
	if err := le.cfg.Lock.Update(ctx, rec); err != nil {
		le.log.Warn("could not detach the lock from the session; candidates wait until the session ends", zap.Error(err))
		return
	}
	le.observeOwnWrite(rec, now)
	le.log.Info("left the lock to expire by its own lease, detached from the session")
}
