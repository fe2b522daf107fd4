package elector

import (
	"time"

	"go.uber.org/zap"

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
	// Renewed is when the session's last successful heartbeat was sent, and
	// whether the session is current (its heartbeat works).
	Renewed() (sent time.Time, current bool)
	// AliveUntil is until when the session named ref is alive by this
	// process's observation (zero: not alive, or never seen); known is
	// false while the process cannot tell.
	AliveUntil(ref string) (until time.Time, known bool)
}

// sessionState is the elector's part of session mode; used by the
// election loop only.
type sessionState struct {
	lock resourcelock.SessionLock
	// mixed is set once a holder was seen that does not understand
	// sessions (istiod, an older meshd, meshd without sessions): it may
	// still be a candidate, and it would take a record that is not
	// rewritten, so this candidate renews its record itself from then on.
	mixed bool
	// seen is the mark of the lock object as it was when the record last
	// observed was new; seenOK is false when it had none. A follower
	// judges the holder by it while the object it last saw carries no mark
	// (deleted, re-created or edited by a writer that dropped it): the
	// holder renews through the session it named there, not through its
	// record, so losing the mark must not make a working holder look
	// expired.
	seen   resourcelock.SessionMark
	seenOK bool
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
	ref := ""
	if !le.session.mixed && r.HolderIdentity == le.cfg.Lock.Identity() {
		if _, current := le.cfg.Session.Renewed(); current {
			ref = le.cfg.Session.Ref()
		}
	}
	le.session.lock.SetSession(ref)
}

// holderSessionRef is the session the lock object last seen names for
// holder; "" when its mark names none or belongs to another holder.
func (le *LeaderElector) holderSessionRef(holder string) string {
	mark, ok := le.session.lock.SessionMark()
	if !ok || mark.Holder != holder {
		return ""
	}
	return mark.Session
}

// observedSessionRef is the session by which a follower judges holder:
// the one the lock object last seen names for it or, when that object
// carries no mark at all, the one named next to the record last observed.
// "" when the holder renews its record itself.
func (le *LeaderElector) observedSessionRef(holder string) string {
	mark, ok := le.session.lock.SessionMark()
	if !ok {
		mark, ok = le.session.seen, le.session.seenOK
	}
	if !ok || mark.Holder != holder {
		return ""
	}
	return mark.Session
}

// noteSessionAware remembers the session mark that came with the record
// just observed, and marks the election mixed when the record's holder
// does not understand sessions.
func (le *LeaderElector) noteSessionAware(rec *resourcelock.Record) {
	if !le.sessionMode() {
		return
	}
	le.session.seen, le.session.seenOK = le.session.lock.SessionMark()
	if le.session.mixed || rec.HolderIdentity == "" || rec.HolderIdentity == le.cfg.Lock.Identity() {
		return
	}
	if mark, ok := le.session.lock.SessionMark(); ok && mark.Holder == rec.HolderIdentity {
		return
	}
	le.session.mixed = true
	le.log.Info("a holder that does not use sessions leads this election; this candidate renews its record itself when it leads",
		zap.String("holder", rec.HolderIdentity))
}

// sessionUntil is until when the observed holder (another candidate) is
// alive by its session; zero when its record names no session. While the
// process cannot tell, the holder counts as alive for one more RetryPeriod.
func (le *LeaderElector) sessionUntil(now time.Time) time.Time {
	if !le.sessionMode() {
		return time.Time{}
	}
	holder := le.GetLeader()
	if holder == "" || holder == le.cfg.Lock.Identity() {
		return time.Time{}
	}
	ref := le.observedSessionRef(holder)
	if ref == "" {
		return time.Time{}
	}
	until, known := le.cfg.Session.AliveUntil(ref)
	if !known {
		return now.Add(le.cfg.RetryPeriod)
	}
	return until
}

// renewedBySession credits the session's heartbeat to this term when the
// lock names the session, and reports whether the renew due now can be
// left to it. Only the object as last seen counts here, never a mark
// remembered from before: a holder whose lock object was deleted writes
// its record again at once. It cannot when the session is not current, when a request
// waits for an answer, or when the watch is broken: the holder then writes
// its record, which also shows it whether someone took the lock meanwhile.
func (le *LeaderElector) renewedBySession() bool {
	if !le.sessionMode() || le.session.mixed {
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
	return current && le.watch != nil && le.watch.healthy() && !le.requestPending() && le.preferredSuccessor() == nil
}
