// Package yield is the release yield of a racing election: a candidate
// that the election's rule ranks lower lets better candidates go first
// when it sees the lock released or expired (the elector's
// Config.YieldOnRelease), so that the best candidate that watches the lock
// takes it and no lesser one holds it for a moment.
//
// Guarantees: a candidate without YieldOnRelease never yields; one with it
// yields for the delay it returns (a negative one counts as none), counted
// from the release it saw, and then tries whether or not anyone took the
// lock meanwhile.
//
// What it assumes of the core: it is called from the election loop only;
// the core tells it of every release a watch delivered or found at the
// first attempt (OnRelease), adds Delay to the end of an expired lease, and
// wakes at WakeAt. It holds no reference to the core or the lock.
package yield

import "time"

// Release is one candidate's release yield. The zero value (or one with a
// nil delay) never yields.
type Release struct {
	delay func() time.Duration
	at    time.Time // the try after a release, when yielding to better candidates
}

// New returns the release yield of a candidate; delay is the elector's
// YieldOnRelease, nil when it does not yield.
func New(delay func() time.Duration) *Release { return &Release{delay: delay} }

// Delay is how long this candidate lets better ones go first when the lock
// is up for grabs (released or expired); zero without YieldOnRelease.
func (r *Release) Delay() time.Duration {
	if r.delay == nil {
		return 0
	}
	return max(r.delay(), 0)
}

// WakeAt is when a candidate that yields after a release tries; zero when
// it does not yield.
func (r *Release) WakeAt(now time.Time) time.Time {
	if r.at.After(now) {
		return r.at
	}
	return time.Time{}
}

// OnRelease decides, for a record seen at now, whether this candidate
// tries at once (false) or lets better candidates go first until WakeAt
// (true); released tells whether the record is a release (no holder, but a
// record).
func (r *Release) OnRelease(released bool, now time.Time) bool {
	if r.delay == nil || !released {
		return false
	}
	d := r.Delay()
	if d <= 0 {
		return false
	}
	r.at = now.Add(d)
	return true
}
