// Package wake computes how long a follower of a watched lock sleeps
// before its next attempt when nothing happens meanwhile: a pure function
// of the times the elector core and its protocols (the release yield,
// coordination, the steal damper, handover, sessions) report, so that the
// core gathers those times and decides nothing about them itself.
//
// Guarantees: the wait is never longer than poll (the jittered retry
// period) once the holder's lease (and yield) has run out, and it lands
// Slack after the time it waits for, never on it.
//
// What it assumes of the caller: every time it passes is one reported by
// the clock of the decision in progress (now); a zero time means the one
// who reports it waits for nothing.
package wake

import "time"

// Slack is added to a computed time so that the wake-up lands after it,
// not on it: a lease ends when now is after its end, and a fake clock
// fires a timer exactly on its time. A real timer never fires early, so
// no more is needed than what covers a time read back from a record,
// which keeps microseconds: one microsecond. Every expiry-driven takeover
// pays it, so it stays that small.
const Slack = time.Microsecond

// Free is the wait of a follower that finds the lock free, handed to it,
// or knows nothing of it: the polling pace poll, cut short by the earliest
// of wakes (when an empty lock may be taken, when a yield or the
// coordinator's patience ends).
func Free(now time.Time, poll time.Duration, wakes ...time.Time) time.Duration {
	for _, at := range wakes {
		if !at.IsZero() {
			poll = min(poll, max(at.Sub(now), 0)+Slack)
		}
	}
	return poll
}

// Held is what a follower of a lock held by another holder waits for.
type Held struct {
	// End is when the holder's lease runs out by the follower's
	// observation, its session included.
	End time.Time
	// Yield is how long the follower lets better candidates go first once
	// the lease ran out: an expired lock is a race like a released one.
	Yield time.Duration
	// Act is when the steal damper or the handover protocol may let the
	// follower act before the lease runs out.
	Act []time.Time
	// Vacancy is when a lock left to the coordinator may be taken.
	Vacancy time.Time
	// Empty is when a lock object found missing or without a record may
	// be taken.
	Empty time.Time
}

// Wait is how long the follower sleeps at now; poll is the jittered retry
// period.
func (h Held) Wait(now time.Time, poll time.Duration) time.Duration {
	deadline := h.End.Add(h.Yield)
	for _, at := range h.Act {
		if !at.IsZero() && at.Before(deadline) {
			deadline = at
		}
	}
	if left := deadline.Sub(now); left > 0 {
		return left + Slack
	}
	if !h.Vacancy.IsZero() {
		// Expired, left to the coordinator for a while.
		return max(h.Vacancy.Sub(now), 0) + Slack
	}
	if !h.Empty.IsZero() {
		// The holder's lease ran out, but the lock object was deleted or
		// re-created without a record meanwhile: it counts as held for a
		// lease from when the follower saw it so, and may be taken then,
		// not a whole poll later.
		poll = min(poll, h.Empty.Sub(now)+Slack)
	}
	// The lock could already be taken, so the attempt that just ended failed
	// (or lost a race): retry at the polling pace, not at once, which would
	// hammer an API server that refuses the write.
	return poll
}
