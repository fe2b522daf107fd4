package sessions

import (
	"fmt"
	"time"

	"github.com/meshd-io/meshd/internal/protocol"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Problems lists what session mode needs of the elector's settings: a
// Lease lock (nil when unset), the watch, and no coordination. s is the
// elector's Config.Session (nil: not in session mode, nothing to check).
func Problems(s protocol.Sessions, lock resourcelock.Interface, watch, coordinated bool) []string {
	if s == nil {
		return nil
	}
	var msgs []string
	if _, ok := lock.(*resourcelock.LeaseLock); !ok && lock != nil {
		// A holder credits a heartbeat only once its own watch of
		// Leases has delivered it back, which proves it has seen every
		// earlier write to its lock only when the lock is a Lease on
		// that same watch.
		msgs = append(msgs, fmt.Sprintf("Session needs a Lease lock (the session's Leases and the lock must ride one watch); %T cannot", lock))
	}
	if !watch {
		msgs = append(msgs, "Session needs Watch: a holder learns through its watch that the lock was taken")
	}
	if coordinated {
		msgs = append(msgs, "Session cannot be combined with Coordination")
	}
	return msgs
}

// Role is session mode as the elector core calls it: the elector's
// Config.Session, nil outside session mode, where Role is the null object
// (no session is named, nothing renews the holder but its own writes). The
// core passes in what it owns: the holder it observed, the session its
// record named, the lease end it computed. Role holds the protocol and
// this candidate's identity, never the core.
type Role struct{ *member } // nil: not in session mode

// member is session mode of one candidate.
type member struct {
	s  protocol.Sessions
	me string
}

// NewRole returns session mode for the candidate called me; s is nil
// outside session mode.
func NewRole(s protocol.Sessions, me string) Role {
	if s == nil {
		return Role{}
	}
	return Role{&member{s: s, me: me}}
}

// On reports whether this elector may renew through a session.
func (r Role) On() bool { return r.member != nil }

// Mark sets the session mark that goes with a write of a record naming
// holder, and reports whether it did (in session mode, where the core notes
// the watch's Epoch before the write).
func (r Role) Mark(holder string) bool {
	if r.member == nil {
		return false
	}
	r.s.Mark(holder == r.me)
	return true
}

// HolderRef is the session the lock object last seen names for holder; ""
// when its mark names none or belongs to another holder, or outside
// session mode.
func (r Role) HolderRef(holder string) string {
	if r.member == nil {
		return ""
	}
	return r.s.HolderRef(holder)
}

// HolderUntil is until when the observed holder, another candidate whose
// record named session ref when it was observed, is alive by its session;
// zero when its record names no session. recordEnd is when its record's
// lease runs out; wake is called at the echo of this process's own
// heartbeat that settles a session judged over.
func (r Role) HolderUntil(now, recordEnd time.Time, holder, ref string, wake func()) time.Time {
	if r.member == nil || holder == "" || holder == r.me || ref == "" {
		return time.Time{}
	}
	return r.s.HolderUntil(now, recordEnd, ref, wake)
}

// Heartbeat is the session's latest heartbeat (when it was sent, whether
// the session is current) for a holder that leads through it: ok is false
// outside session mode, once a holder without sessions was seen, or when
// the lock object last seen does not name this candidate (leader, as
// observed) with this process's session.
func (r Role) Heartbeat(leader string) (sent time.Time, current, ok bool) {
	if r.member == nil || r.s.Mixed() {
		return time.Time{}, false, false
	}
	ref := r.s.Ref()
	if ref == "" || leader != r.me || r.s.HolderRef(r.me) != ref {
		return time.Time{}, false, false
	}
	sent, current = r.s.Renewed()
	return sent, current, true
}

// HeldThrough reports whether this candidate, leader as observed, holds
// the lock through a session: a lock it leaves must then be detached.
func (r Role) HeldThrough(leader string) bool {
	return r.member != nil && leader == r.me && r.s.HolderRef(r.me) != ""
}

// Detach marks the next write as naming no session.
func (r Role) Detach() { r.s.Detach() }

// Mixed reports whether this candidate, in session mode, renews its record
// itself because it saw a holder that does not use sessions.
func (r Role) Mixed() bool { return r.member != nil && r.s.Mixed() }

// EarlierProcess reports whether, in session mode, the lock's mark names
// another session of this identity (a record written before a restart).
func (r Role) EarlierProcess() bool { return r.member != nil && r.s.EarlierProcess() }

// NoteHolder tells session mode of a holder observed.
func (r Role) NoteHolder(holder string) {
	if r.member != nil {
		r.s.NoteHolder(holder)
	}
}
