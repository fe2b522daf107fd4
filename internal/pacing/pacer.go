// Package pacing paces the first attempts of many electors together: one
// token bucket and one queue of slots for all the electors given the same
// Pacer (the elector's Config.Pacer), so that a program starting thousands
// of elections at once sends their first requests to the API server at a
// bounded rate instead of in one burst, and slows down by itself when the
// API server answers slowly (at most a fixed number wait for an answer at
// any time). Waiters for a slot are served lowest priority value first; the
// elector derives the priority from its identity and lock, so that replicas
// starting the same elections together create different lock objects first
// rather than all racing for the same one.
//
// A Pacer holds no goroutine, needs no stopping and is safe for concurrent
// use. It knows nothing of the elector: it hands out turns.
package pacing

import (
	"time"

	"golang.org/x/time/rate"
)

// The pace of a Pacer: FirstAttemptBurst attempts at once, then
// FirstAttemptQPS a second, with at most FirstAttemptsInFlight holding a
// slot.
const (
	FirstAttemptQPS       = 1000
	FirstAttemptBurst     = 100
	FirstAttemptsInFlight = 32
)

// Pacer paces first attempts: one token bucket and one queue of slots. The
// program creates one and gives it to every elector that should be paced
// together; package election's Shared keeps one for its elections. The
// zero value is not usable: call NewPacer.
type Pacer struct {
	tokens *rate.Limiter
	slots  *slotQueue
}

// NewPacer returns a pacer of 1000 first attempts a second, in bursts of at
// most 100, with at most 32 waiting for the API server at once.
func NewPacer() *Pacer {
	return &Pacer{
		tokens: rate.NewLimiter(FirstAttemptQPS, FirstAttemptBurst),
		slots:  newSlotQueue(FirstAttemptsInFlight),
	}
}

// Built reports whether p was built by NewPacer.
func (p *Pacer) Built() bool { return p != nil && p.tokens != nil && p.slots != nil }

// Reserve takes a token: the caller waits delay before its attempt, or
// calls cancel to give the token back when it does not make the attempt.
func (p *Pacer) Reserve() (delay time.Duration, cancel func()) {
	r := p.tokens.Reserve()
	return r.Delay(), r.Cancel
}

// Wait joins the queue of slots with priority prio (lowest first, then in
// arrival order): granted is closed once the caller holds a slot. leave
// gives the place in the queue up, or the slot back once it was granted;
// it must be called exactly once.
func (p *Pacer) Wait(prio uint64) (granted <-chan struct{}, leave func()) {
	w := p.slots.wait(prio)
	return w.granted, func() { p.slots.leave(w) }
}
