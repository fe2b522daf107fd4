package elector

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// sessionMode reports whether this elector may renew through a session.
func (le *LeaderElector) sessionMode() bool { return le.cfg.Session != nil }

// markSession sets the session mark that goes with a write of r, and notes
// the watch's Epoch before the write (session mode needs a watch).
func (le *LeaderElector) markSession(r resourcelock.Record) {
	if le.sessionMode() {
		le.cfg.Session.Mark(r.HolderIdentity == le.cfg.Lock.Identity())
		le.loop.writeEpoch = le.watch.Epoch()
	}
}

// holderSessionRef is the session the lock object last seen names for
// holder; "" when its mark names none or belongs to another holder, or
// outside session mode.
func (le *LeaderElector) holderSessionRef(holder string) string {
	if !le.sessionMode() {
		return ""
	}
	return le.cfg.Session.HolderRef(holder)
}

// sessionUntil is until when the observed holder (another candidate) is
// alive by its session; zero when its record names no session. The session
// is the one named when the record was observed: a lock object deleted or
// re-created since (which is not a release) keeps it. The echo of this
// process's own heartbeat that settles a session judged over wakes the
// elector (Trigger).
func (le *LeaderElector) sessionUntil(now, recordEnd time.Time) time.Time {
	if !le.sessionMode() {
		return time.Time{}
	}
	le.mu.Lock()
	holder, ref := le.obs.record.HolderIdentity, le.obs.session
	le.mu.Unlock()
	if holder == "" || holder == le.cfg.Lock.Identity() || ref == "" {
		return time.Time{}
	}
	return le.cfg.Session.HolderUntil(now, recordEnd, ref, le.Trigger)
}

// holderNamesSession reports whether the observed holder's record names a
// session.
func (le *LeaderElector) holderNamesSession() bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.obs.session != ""
}

// renewedBySession credits the session's heartbeat to this term when the
// lock names the session, and reports whether the renew due now can be
// left to it. It cannot when the session is not current, when a request
// waits for an answer (or a refusal would now be an acceptance), when the
// watch has broken since the holder last wrote its record (it may still be
// catching up), or when the lock's Pod mark is pending: the holder then
// writes its record, which also shows it whether someone took the lock
// meanwhile.
func (le *LeaderElector) renewedBySession() bool {
	if !le.sessionMode() || le.cfg.Session.Mixed() {
		return false
	}
	me, ref := le.cfg.Lock.Identity(), le.cfg.Session.Ref()
	if ref == "" || le.GetLeader() != me || le.holderSessionRef(me) != ref {
		return false
	}
	sent, current := le.cfg.Session.Renewed()
	if sent.After(le.loop.lastRenew) {
		le.loop.lastRenew = sent
		le.mu.Lock()
		le.state.sessionRenew = sent
		le.mu.Unlock()
	}
	return current && le.watch.UnbrokenSince(le.loop.watchEpoch) && !le.requestToAnswer() && le.preferredSuccessor() == nil &&
		!lockcap.PodMarkPending(le.cfg.Lock)
}

// SessionFallback reports whether this candidate, in session mode, renews
// its record itself because it saw a holder that does not use sessions.
func (le *LeaderElector) SessionFallback() bool { return le.sessionMode() && le.cfg.Session.Mixed() }

// leaveSession is how a holder in session mode leaves a lock to expire:
// its session outlives this term (the process may lead other elections),
// so it writes its record once more with a mark that names no session, and
// followers wait a lease from that write, as they would for a holder
// without sessions. Nothing is written when the lock is not held through
// the session. If the write fails, followers keep waiting for as long as
// the session lives (a limit stated in docs/sessions.md).
func (le *LeaderElector) leaveSession() {
	me := le.cfg.Lock.Identity()
	if !le.sessionMode() || le.GetLeader() != me || le.holderSessionRef(me) == "" {
		return
	}
	prev, _ := le.Observed()
	ctx, cancel := context.WithTimeout(context.Background(), le.cfg.RenewDeadline)
	defer cancel()
	now := le.clock.Now()
	rec := le.desired(now)
	rec.AcquireTime, rec.LeaderTransitions = prev.AcquireTime, prev.LeaderTransitions
	le.cfg.Session.Detach()
	le.metrics.Request(le.cfg.Name, "update")
	if err := le.cfg.Lock.Update(ctx, rec); err != nil {
		le.log.Warn("could not detach the lock from the session; candidates wait until the session ends", zap.Error(err))
		return
	}
	le.observeOwnWrite(rec, now)
	le.log.Info("left the lock to expire by its own lease, detached from the session")
}
