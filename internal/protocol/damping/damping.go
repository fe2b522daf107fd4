// Package damping is the steal damper of a prioritized election: the part
// of the priority protocol that keeps candidates which disagree about who
// outranks whom (for example while one of them sees a new default revision
// late) from taking the lock from each other in a cycle.
//
// Guarantees: a candidate steals at most once per RetryPeriod, never within
// a RetryPeriod of losing the lock or of the holder's term beginning, and,
// after wanting the lock back from the key that took it from it (a cycle),
// not by force until a LeaseDuration after that loss, or until its
// comparison agrees with the holder's again. The hold-off does not grow
// with further cycles: a candidate that cannot ask the holder (no handover,
// or a holder that does not cooperate) has no way to learn that the other
// side changed its mind, and a longer wait would keep a lesser holder past
// LeaseDuration + RetryPeriod after every candidate agrees. While the
// disagreement lasts, this candidate forces at most one steal per lease.
//
// What it assumes of the core: the core, through the priority rule of
// package preemption, asks Check only when its key comparison lets it take
// the lock from the holder, calls Agree when the comparison does not, and
// reports each loss of the lock while its lease was valid (Stolen); the
// core itself reports each steal it made (Stole) and wakes at WakeAt. It
// holds no reference to the core or the lock.
package damping

import (
	"fmt"
	"time"
)

// cycleWindowLeases is how many leases after a loss wanting the lock back
// from the same key still counts as a cycle.
const cycleWindowLeases = 17

// Preemption tells whether a candidate currently preempts holders it
// outranks. It is suspended after a steal cycle: this candidate outranked a
// holder by its comparison, and a holder with that key outranked it by
// theirs, which happens when candidates disagree (for example about the
// default revision, while one of them sees it late). While suspended, the
// holder keeps the lock until it releases it, its lease expires, or it
// hands the lock over on this candidate's request (a cooperative holder
// does so only when its own comparison agrees): a suspended candidate
// asks, and never takes the lock by force.
type Preemption struct {
	// Suspended is true from a detected cycle until this candidate's
	// comparison no longer lets it take the lock from the holder (the
	// candidates agree again).
	Suspended bool
	// HolderKey is the key this candidate and the holder disagree about.
	HolderKey string
	// Since is when the latest cycle was detected.
	Since time.Time
	// RetryAt is when this candidate may try once more to take the lock
	// from a holder it outranks: a LeaseDuration after it lost the lock in
	// the latest cycle.
	RetryAt time.Time
	// Cycles counts the cycles detected since the candidates last agreed.
	Cycles int
}

// String describes p for logs and status pages.
func (p Preemption) String() string {
	if !p.Suspended {
		return "active"
	}
	return fmt.Sprintf("suspended after %d steal cycle(s) with holder key %q until %s",
		p.Cycles, p.HolderKey, p.RetryAt.UTC().Format(time.RFC3339))
}

// Damper limits how often one candidate takes a lock by key comparison:
// at most once per RetryPeriod, not within a RetryPeriod after the lock
// was taken from it or after the holder's term began, and not at all for a
// hold-off after a steal cycle. It is used by one election loop only.
type Damper struct {
	retry, lease time.Duration

	lastSteal time.Time
	// stolenBy and stolenAt describe the last time another holder took the
	// lock from this candidate while its lease was valid.
	stolenBy string
	stolenAt time.Time

	state Preemption
	// youngUntil is when the holder's term that a steal was last refused
	// for, as too young, has lasted a RetryPeriod.
	youngUntil time.Time
}

// New returns the damper of a candidate with the election's RetryPeriod
// and LeaseDuration.
func New(retryPeriod, leaseDuration time.Duration) *Damper {
	return &Damper{retry: retryPeriod, lease: leaseDuration}
}

// State is the candidate's preemption state now.
func (d *Damper) State() Preemption { return d.state }

// Verdict is what the damper says about a steal wanted now.
type Verdict int

// The verdicts of Check.
const (
	Allowed   Verdict = iota // the steal may go ahead
	Later                    // too soon after the previous steal
	Cycle                    // a cycle was detected just now: preemption is suspended
	Suspended                // preemption is suspended by an earlier cycle
)

// Check is called when this candidate's comparison lets it take the lock
// from a holder with holderKey.
func (d *Damper) Check(now time.Time, holderKey string) Verdict {
	switch {
	case d.state.Suspended && now.Before(d.state.RetryAt):
		return Suspended
	case d.stolenBy == holderKey && now.Before(d.stolenAt.Add(d.lease*cycleWindowLeases)):
		// The hold-off counts from the loss, not from now: a candidate whose
		// work took long to stop asks Check late, and counting from then
		// would stretch the wait past a lease after the other side agreed.
		d.state = Preemption{Suspended: true, HolderKey: holderKey, Since: now,
			RetryAt: d.stolenAt.Add(d.lease), Cycles: d.state.Cycles + 1}
		d.stolenBy = ""
		return Cycle
	case now.Before(d.lastSteal.Add(d.retry)) || now.Before(d.stolenAt.Add(d.retry)):
		return Later
	}
	return Allowed
}

// Young reports whether a holder's term, which this candidate saw begin at
// since, is younger than a RetryPeriod: then nobody steals from it yet.
// Every candidate judging from when it saw the term begin, steals of one
// election, by any candidates, come at least a RetryPeriod apart, so that
// a chain of candidates that each outrank the previous holder moves the
// lock once per RetryPeriod, not all at once. A zero since (a term that
// was already on when this candidate first looked) is not young.
func (d *Damper) Young(now, since time.Time) bool {
	if since.IsZero() || !now.Before(since.Add(d.retry)) {
		return false
	}
	d.youngUntil = since.Add(d.retry)
	return true
}

// WakeAt is when a steal refused now may be allowed; zero when no steal was
// refused for timing.
func (d *Damper) WakeAt(now time.Time) time.Time {
	var at time.Time
	for _, t := range []time.Time{d.lastSteal.Add(d.retry), d.stolenAt.Add(d.retry), d.youngUntil} {
		if t.After(now) && (at.IsZero() || t.After(at)) {
			at = t
		}
	}
	if d.state.Suspended && d.state.RetryAt.After(now) {
		at = d.state.RetryAt
	}
	return at
}

// Stole records a steal by this candidate.
func (d *Damper) Stole(now time.Time) { d.lastSteal = now }

// Stolen records that a holder with key byKey took the lock from this
// candidate while its lease was valid. disputed says whether, by this
// candidate's own comparison at that moment, it outranks byKey: only then is
// taking the lock back a cycle. A holder that outranks this candidate by its
// view too (the default revision changed, and both saw it) took what it was
// entitled to, and a later change may entitle this candidate again.
func (d *Damper) Stolen(now time.Time, byKey string, disputed bool) {
	d.stolenBy, d.stolenAt = "", now
	if disputed {
		d.stolenBy = byKey
	}
}

// Agree is called when this candidate's comparison does not let it take the
// lock from the holder: the candidates agree (again). The dispute over the
// last steal from this candidate is over too: a later change of the
// default that entitles this candidate again makes its steal legitimate,
// not a cycle. It reports whether a suspension ended.
func (d *Damper) Agree() bool {
	was := d.state.Suspended || d.state.Cycles > 0
	d.state = Preemption{}
	d.stolenBy = ""
	return was
}
