// Package coordination is a candidate's side of a coordinated election
// (docs/coordinated.md), a protocol the elector core calls through its
// Coordination interface: a coordinator picks the holder and writes it into
// the lock, or names a better candidate as the preferred holder; candidates
// follow.
//
// Guarantees: a candidate never takes a held lock, and leaves a vacant one
// (free, expired or missing) to the coordinator for its patience, counted
// from when it first saw the lock vacant, so that an election never stays
// without a leader when no coordinator runs; a successor or preferred
// holder that the program does not know as live is never handed the lock.
//
// What it assumes of the core: the core calls it from the election loop
// only, through Role, which stands for a racing election too (then every
// answer is a racing candidate's); it reports every observed record that
// names a holder (Occupied) and every lock it took (Acquired); it never
// preempts a holder (validation, through Problems, refuses a key
// comparison or handover beside coordination, and a lock without a
// preferred holder). Role reads the preferred holder from the lock object
// the core last read or was delivered, and asks Live about it; the core
// writes every record. Candidate holds no reference to the core or the
// lock; Role holds the lock and the core's logger, never the core.
package coordination

import "time"

// Config configures one coordinated candidate.
type Config struct {
	// Successor returns the candidate this holder hands the lock to when
	// its term ends gracefully: the best live candidate other than itself,
	// by the coordinator's rule. ok is false when none is known; the lock
	// is then released and the coordinator assigns it. Nil: always release.
	Successor func() (identity, key string, ok bool)
	// Live, if set, tells whether a candidate named as preferred holder is
	// still a live candidate as far as this process knows. A preference
	// for one that is not is ignored until the coordinator corrects it.
	Live func(identity string) bool
	// Patience is how long this candidate leaves a vacant lock to the
	// coordinator before it takes the lock itself. It must exceed what a
	// coordinator that takes over from a dead one needs: its own election's
	// lease, then a lease of its own observation before it calls a silent
	// holder's lease expired. Zero means 2 x LeaseDuration. A candidate
	// that the election ranks lower (YieldDelay) waits that much longer,
	// so that the best one takes the lock when no coordinator does.
	Patience time.Duration
	// LeaseDuration is the elector's.
	LeaseDuration time.Duration
	// YieldDelay, if set, is how long this candidate lets better ones go
	// first; the elector's YieldOnRelease.
	YieldDelay func() time.Duration
}

// Candidate is one candidate's coordination state. It is used by one
// election loop only.
type Candidate struct {
	cfg Config
	// vacantSince is when the lock was first seen vacant; zero while held.
	vacantSince time.Time
}

// New returns the coordination of one candidate.
func New(cfg Config) *Candidate { return &Candidate{cfg: cfg} }

// Problems lists what is wrong with the configuration.
func (c *Candidate) Problems() []string {
	if c.cfg.Patience < 0 {
		return []string{"Coordination.Patience must not be negative"}
	}
	return nil
}

// Patience is how long a vacant lock is left to the coordinator.
func (c *Candidate) Patience() time.Duration {
	p := c.cfg.Patience
	if p <= 0 {
		p = 2 * c.cfg.LeaseDuration
	}
	if c.cfg.YieldDelay != nil {
		p += max(c.cfg.YieldDelay(), 0)
	}
	return p
}

// LeaveVacant reports whether a candidate that found the lock vacant at
// now must leave it to the coordinator: until it has seen the lock vacant
// for its patience.
func (c *Candidate) LeaveVacant(now time.Time) bool {
	if c.vacantSince.IsZero() {
		c.vacantSince = now
	}
	return now.Before(c.vacantSince.Add(c.Patience()))
}

// Occupied notes that the lock names a holder: it is no longer vacant.
func (c *Candidate) Occupied() { c.vacantSince = time.Time{} }

// Acquired notes that this candidate took the lock; unassigned is true
// when it took a vacant lock by its own write after its patience, which no
// coordinator assigned (a lock a coordinator assigned was observed naming
// this candidate first, which cleared the vacancy).
func (c *Candidate) Acquired() (unassigned bool) {
	unassigned = !c.vacantSince.IsZero()
	c.vacantSince = time.Time{}
	return unassigned
}

// WakeAt is when a candidate that saw the lock vacant may take it itself;
// zero when it waits for nothing.
func (c *Candidate) WakeAt() time.Time {
	if c.vacantSince.IsZero() {
		return time.Time{}
	}
	return c.vacantSince.Add(c.Patience())
}

// Live reports whether identity is a live candidate as far as the program
// knows; true without a Live hook.
func (c *Candidate) Live(identity string) bool { return c.cfg.Live == nil || c.cfg.Live(identity) }

// Successor is the best live candidate by the coordinator's rule; ok is
// false when none is known or there is no Successor hook.
func (c *Candidate) Successor() (identity, key string, ok bool) {
	if c.cfg.Successor == nil {
		return "", "", false
	}
	return c.cfg.Successor()
}
