package elector

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Sessions is session mode as the core sees it (see Config.Session;
// package internal/protocol/sessions implements it on the process's
// session): a holder whose lock names its session does not rewrite its
// record every RetryPeriod; the session's heartbeat keeps it alive, and
// followers judge it alive while the session is, by their own observation.
// See "Sessions" in the package doc. The core calls it from the election
// loop only, except Mixed.
type Sessions interface {
	// Ref names this process's session in records; "" while it has none.
	Ref() string
	// Renewed is when this process's latest heartbeat was sent (one the
	// watch delivered back), and whether the session is current.
	Renewed() (sent time.Time, current bool)
	// Mixed reports whether a holder without sessions was seen, so that
	// this candidate renews its record itself.
	Mixed() bool
	// Mark sets the session mark of the next write; mine: the record
	// written names this candidate.
	Mark(mine bool)
	// Detach sets a mark that names no session for the next write.
	Detach()
	// HolderRef is the session the lock object last seen names for holder.
	HolderRef(holder string) string
	// EarlierProcess reports whether the lock's mark names another session
	// of this identity (a record written before a restart).
	EarlierProcess() bool
	// NoteHolder is told of every other holder observed.
	NoteHolder(holder string)
	// HolderUntil is until when another holder whose record names session
	// ref is alive by it; recordEnd is when its record's lease runs out;
	// wake is called when a judgement may change.
	HolderUntil(now, recordEnd time.Time, ref string, wake func()) time.Time
}

// sessionMode reports whether this elector may renew through a session.
func (le *LeaderElector) sessionMode() bool { return le.cfg.Session != nil }

// markSession sets the session mark that goes with a write of r.
func (le *LeaderElector) markSession(r resourcelock.Record) {
	if le.sessionMode() {
		le.cfg.Session.Mark(r.HolderIdentity == le.cfg.Lock.Identity())
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
// watch is broken, or when the lock's Pod mark is pending: the holder then
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
	return current && le.watch != nil && le.watch.Healthy() && !le.requestToAnswer() && le.preferredSuccessor() == nil &&
		!podMarkPending(le.cfg.Lock)
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
