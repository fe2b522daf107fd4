package elector

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Session is a heartbeat shared by the elections of a process (package
// election/session implements it). A holder whose lock names its session
// does not rewrite its record every RetryPeriod: the session's heartbeat
// keeps it alive, and followers judge it alive while the session is, by
// their own observation. See "Sessions" in the package doc.
type Session interface {
	// Ref names the session in the records this candidate writes; "" while
	// it has none.
	Ref() string
	// Renewed is when the session's latest heartbeat was sent, counting
	// only a heartbeat that the watch this elector follows its lock with
	// has delivered back (so that every write to the lock committed before
	// it has been seen), and whether the session is current (its heartbeat
	// works).
	Renewed() (sent time.Time, current bool)
	// AliveUntil is until when the session named ref is alive by this
	// process's observation (zero: not alive, or never seen); known is
	// false while the process cannot tell.
	AliveUntil(ref string) (until time.Time, known bool)
	// EchoedSince reports whether a heartbeat of this process's own
	// session sent after t (not at t: it may have been sent before a
	// judgement made at that clock reading) has come back through its
	// watch; if not, it has one sent and calls notify (which must not
	// block) when the next comes back.
	EchoedSince(t time.Time, notify func()) bool
}

// sessionState is the elector's part of session mode; used by the
// election loop only.
type sessionState struct {
	lock lockcap.SessionLock
	// over is when this candidate first judged the observed holder's
	// session over, with the session and its expiry as then observed.
	over sessionOver
	// mixed is set once a holder was seen that does not understand
	// sessions (istiod, an older meshd, meshd without sessions): it may
	// still be a candidate, and it would take a record that is not
	// rewritten, so this candidate renews its record itself from then on.
	mixed atomic.Bool
}

// sessionOver is a judgement that a holder's session has run out.
type sessionOver struct {
	ref   string
	until time.Time
	at    time.Time
}

// sessionMode reports whether this elector may renew through a session.
func (le *LeaderElector) sessionMode() bool {
	return le.cfg.Session != nil && le.session.lock != nil
}

// markSession sets the session mark that goes with a write of r: this
// candidate's current session when r names it and the session works,
// otherwise a mark without a session (the holder renews the record).
func (le *LeaderElector) markSession(r resourcelock.Record) {
	if !le.sessionMode() {
		return
	}
	ref, mixed := "", le.session.mixed.Load()
	if !mixed && r.HolderIdentity == le.cfg.Lock.Identity() {
		if _, current := le.cfg.Session.Renewed(); current {
			ref = le.cfg.Session.Ref()
		}
	}
	le.session.lock.SetSession(ref, mixed)
}

// holderSessionRef is the session the lock object last seen names for
// holder; "" when its mark names none or belongs to another holder, or
// outside session mode.
func (le *LeaderElector) holderSessionRef(holder string) string {
	if !le.sessionMode() {
		return ""
	}
	mark, ok := le.session.lock.SessionMark()
	if !ok || mark.Holder != holder {
		return ""
	}
	return mark.Session
}

// noteSessionAware marks the election mixed when the holder of the record
// just observed does not understand sessions.
func (le *LeaderElector) noteSessionAware(rec *resourcelock.Record) {
	if !le.sessionMode() || le.session.mixed.Load() || rec.HolderIdentity == "" || rec.HolderIdentity == le.cfg.Lock.Identity() {
		return
	}
	if mark, ok := le.session.lock.SessionMark(); ok && mark.Holder == rec.HolderIdentity && !mark.Mixed {
		return
	}
	le.session.mixed.Store(true)
	le.log.Info("a holder that does not use sessions leads this election; this candidate renews its record itself when it leads",
		zap.String("holder", rec.HolderIdentity))
}

// sessionUntil is until when the observed holder (another candidate) is
// alive by its session; zero when its record names no session. The session
// is the one named when the record was observed: a lock object deleted or
// re-created since (which is not a release) keeps it.
//
// A session that this process's watch shows over counts as over only once
// a heartbeat of this process's own session, sent after that was first
// judged, has come back through the same watch: the watch may lag, but it
// delivers in order, so every heartbeat of the holder committed before the
// echo has then been seen, and one committed after it was sent past the
// holder's renew deadline, too late to extend its term. Until then, and
// while the process cannot tell at all, the holder counts as alive for one
// more RetryPeriod; the echo wakes the elector (Trigger).
func (le *LeaderElector) sessionUntil(now, recordEnd time.Time) time.Time {
	if !le.sessionMode() {
		return time.Time{}
	}
	le.mu.Lock()
	holder, ref := le.observedRecord.HolderIdentity, le.observedSession
	le.mu.Unlock()
	if holder == "" || holder == le.cfg.Lock.Identity() || ref == "" {
		return time.Time{}
	}
	until, known := le.cfg.Session.AliveUntil(ref)
	switch {
	case !known:
		return now.Add(le.cfg.RetryPeriod)
	case until.After(now) || recordEnd.After(now):
		return until // alive, or the record's own lease decides for now
	}
	over := &le.session.over
	if over.ref != ref || !over.until.Equal(until) {
		*over = sessionOver{ref: ref, until: until, at: now}
	}
	if !le.cfg.Session.EchoedSince(over.at, le.Trigger) {
		return now.Add(le.cfg.RetryPeriod)
	}
	return until
}

// holderNamesSession reports whether the observed holder's record names a
// session.
func (le *LeaderElector) holderNamesSession() bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.observedSession != ""
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// renewedBySession credits the session's heartbeat to this term when the
// lock names the session, and reports whether the renew due now can be
// left to it. It cannot when the session is not current, when a request
// waits for an answer (or a refusal would now be an acceptance), or when
// the watch is broken: the holder then writes
// its record, which also shows it whether someone took the lock meanwhile.
func (le *LeaderElector) renewedBySession() bool {
	if !le.sessionMode() || le.session.mixed.Load() {
		return false
	}
	me, ref := le.cfg.Lock.Identity(), le.cfg.Session.Ref()
	if ref == "" || le.GetLeader() != me || le.holderSessionRef(me) != ref {
		return false
	}
	sent, current := le.cfg.Session.Renewed()
	if sent.After(le.lastRenew) {
		le.lastRenew = sent
		le.mu.Lock()
		le.sessionRenew = sent
		le.mu.Unlock()
	}
	return current && le.watch != nil && le.watch.healthy() && !le.requestToAnswer() && le.preferredSuccessor() == nil
}

// SessionFallback reports whether this candidate, in session mode, renews
// its record itself because it saw a holder that does not use sessions.
func (le *LeaderElector) SessionFallback() bool { return le.session.mixed.Load() }

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
	le.session.lock.SetSession("", le.session.mixed.Load())
	le.metrics.Request(le.cfg.Name, "update")
	if err := le.cfg.Lock.Update(ctx, rec); err != nil {
		le.log.Warn("could not detach the lock from the session; candidates wait until the session ends", zap.Error(err))
		return
	}
	le.observeOwnWrite(rec, now)
	le.log.Info("left the lock to expire by its own lease, detached from the session")
}
