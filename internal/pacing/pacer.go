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
// use. It knows nothing of the elector: it hands out turns. The elector
// core calls it through First, which asks it for the elector's very first
// attempt only and stands for an elector without a pacer too; validation
// asks Problems.
package pacing

import (
	"context"
	"hash/fnv"
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

// Turn waits for an elector's turn to make its first attempt: a slot of
// the queue, where it is served in the order of a hash of name (the
// elector's identity and lock), then in arrival order, and then a token of
// the bucket. It gives up, handing its place or the slot and token back,
// when ctx ends or giveUp says the attempt is no longer needed (the
// elector's watch shows a holder it may not take the lock from); giveUp is
// asked at the start and at every wake-up. release gives the slot back
// after the attempt; it is a no-op when Turn gave up, and must be called
// exactly once either way.
//
// The slot comes first so that only the few holding one (at most
// FirstAttemptsInFlight) hold tokens: the rate then paces the attempts that
// are made, in the hashed order, while a waiter that gives up in the queue
// has taken no token. Taken the other way round, every starting elector
// would reserve a token at once, in the order the program started them,
// the same in every process, and a reservation given up would not bring
// the later ones forward: processes starting the same elections would
// walk through them in step, at the rate, however many of their attempts
// turned out to be unneeded.
func (p *Pacer) Turn(ctx context.Context, name string, wakeups <-chan struct{}, giveUp func() bool) (release func()) {
	nothing := func() {}
	w := p.slots.wait(slotOrder(name))
	leave := func() { p.slots.leave(w) }
	if !await(ctx, nil, w.granted, wakeups, giveUp) {
		leave()
		return nothing
	}
	r := p.tokens.Reserve()
	wait := time.NewTimer(r.Delay())
	defer wait.Stop()
	if !await(ctx, wait.C, nil, wakeups, giveUp) {
		r.Cancel()
		leave()
		return nothing
	}
	return leave
}

// await waits until ready fires or granted is closed (true), or gives up
// (false) when ctx ends or giveUp says so. A nil channel is not waited for.
func await(ctx context.Context, ready <-chan time.Time, granted <-chan struct{}, wakeups <-chan struct{}, giveUp func() bool) bool {
	for {
		if giveUp() {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-ready:
			return true
		case <-granted:
			return true
		case <-wakeups:
		}
	}
}

// slotOrder is where an elector named name queues for a slot.
func slotOrder(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}
