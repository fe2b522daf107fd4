package coordination

import (
	"time"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/protocol"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Problems lists what is wrong with a coordinated election's settings: c
// is the elector's Config.Coordination (nil: a racing election, nothing to
// check), lock its lock (nil when unset), and preempts whether a key
// comparison or handover is set beside it.
func Problems(c protocol.Coordination, lock resourcelock.Interface, preempts bool) []string {
	if c == nil {
		return nil
	}
	var msgs []string
	if _, ok := lock.(lockcap.CoordinatedLock); lock != nil && !ok {
		msgs = append(msgs, "Coordination needs a lock that carries a preferred holder (a Lease)")
	}
	if preempts {
		msgs = append(msgs, "a coordinated candidate never takes the lock from its holder: KeyComparison and Handover must be unset")
	}
	return append(msgs, c.Problems()...)
}

// Role is coordination as the elector core calls it: the elector's
// Config.Coordination together with the lock's preferred holder. In a
// racing election (no Coordination) it is the null object: it never leaves
// a vacant lock, waits for nothing and names no successor, so the core
// calls it without asking which kind of election it runs. It holds the
// lock (to read the preferred holder) and a logger, never the core.
type Role struct{ *coordinated } // nil: a racing election

// coordinated is the coordination of a candidate that follows a
// coordinator.
type coordinated struct {
	c    protocol.Coordination
	lock lockcap.CoordinatedLock
	me   string
	log  *zap.Logger
}

// NewRole returns the coordination of the candidate whose lock is lock; c
// is nil for a racing election. Validation (Problems) has checked that the
// lock of a coordinated one carries a preferred holder.
func NewRole(c protocol.Coordination, lock resourcelock.Interface, log *zap.Logger) Role {
	if c == nil {
		return Role{}
	}
	return Role{&coordinated{c: c, lock: lock.(lockcap.CoordinatedLock), me: lock.Identity(), log: log}}
}

// Coordinated reports whether this candidate follows a coordinator.
func (r Role) Coordinated() bool { return r.coordinated != nil }

// LeaveVacant reports whether a coordinated candidate that found the lock
// vacant at now must leave it to the coordinator. Racing candidates never
// leave it.
func (r Role) LeaveVacant(now time.Time) bool { return r.coordinated != nil && r.c.LeaveVacant(now) }

// Occupied notes that the lock names a holder.
func (r Role) Occupied() {
	if r.coordinated != nil {
		r.c.Occupied()
	}
}

// Acquired notes that this candidate took the lock: a coordinated one that
// took a vacant lock no coordinator assigned says so.
func (r Role) Acquired() {
	if r.coordinated != nil && r.c.Acquired() {
		r.log.Warn("no coordinator assigned the vacant lock within the patience; took it as a racing candidate would",
			zap.Duration("patience", r.c.Patience()))
	}
}

// WakeAt is when a coordinated candidate that saw the lock vacant may take
// it itself; zero when it waits for nothing.
func (r Role) WakeAt() time.Time {
	if r.coordinated == nil {
		return time.Time{}
	}
	return r.c.WakeAt()
}

// Preferred returns the candidate named as preferred holder in the lock
// object last seen, when it is a live one other than this holder.
func (r Role) Preferred() *lockmeta.Handover {
	if r.coordinated == nil {
		return nil
	}
	name, key := r.lock.PreferredHolder()
	if name == "" || name == r.me || !r.c.Live(name) {
		return nil
	}
	return r.successor(name, key)
}

// Directed is who a holder ending its term gracefully hands the lock to
// when no candidate asked: the preferred holder, else the best live
// candidate Coordination.Successor knows. Nil: release.
func (r Role) Directed() *lockmeta.Handover {
	if h := r.Preferred(); h != nil {
		return h
	}
	if r.coordinated == nil {
		return nil
	}
	name, key, ok := r.c.Successor()
	if !ok || name == "" || name == r.me {
		return nil
	}
	return r.successor(name, key)
}

// successor is a handover from this holder to name, which asked nothing.
func (r Role) successor(name, key string) *lockmeta.Handover {
	return &lockmeta.Handover{Holder: r.me, Candidate: name, CandidateKey: key}
}
