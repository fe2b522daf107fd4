package sim

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// simClock is the actors' fake clock. Unlike client-go's FakeClock, whose
// Step fires every due timer at once and lets the woken goroutines race,
// it fires due timers one at a time, in the order of their deadlines and,
// for equal deadlines, of their arming, and settles the world after each
// (the settle hook). Two candidates whose timers fall on the same instant
// therefore act one after the other, in an order that depends only on what
// happened before: the seed.
type simClock struct {
	mu      sync.Mutex
	now     time.Time
	armed   uint64 // arming sequence: orders timers with equal deadlines
	waiters map[*simWaiter]struct{}
	// settle, when set, runs after every timer fired by Step: it waits
	// until the goroutines the timer woke are blocked again.
	settle func()
}

var (
	_ clock.WithTicker           = (*simClock)(nil)
	_ clock.WithDelayedExecution = (*simClock)(nil)
)

// simWaiter is one armed timer, ticker or AfterFunc.
type simWaiter struct {
	at     time.Time
	seq    uint64
	ch     chan time.Time // nil for AfterFunc
	fn     func()
	period time.Duration // tickers only
}

func newSimClock(t0 time.Time) *simClock {
	return &simClock{now: t0, waiters: map[*simWaiter]struct{}{}}
}

// Now implements clock.PassiveClock.
func (c *simClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Since implements clock.PassiveClock.
func (c *simClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// arm schedules w d from now (a due or past deadline fires at the next Step).
func (c *simClock) arm(w *simWaiter, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked(w, d)
}

func (c *simClock) armLocked(w *simWaiter, d time.Duration) {
	if d < 0 {
		d = 0
	}
	c.armed++
	w.at, w.seq = c.now.Add(d), c.armed
	c.waiters[w] = struct{}{}
}

// disarm removes w and reports whether it was armed.
func (c *simClock) disarm(w *simWaiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.waiters[w]
	delete(c.waiters, w)
	return ok
}

// earliestLocked is the armed waiter that fires first, or nil.
func (c *simClock) earliestLocked() *simWaiter {
	var first *simWaiter
	for w := range c.waiters {
		if first == nil || w.at.Before(first.at) || (w.at.Equal(first.at) && w.seq < first.seq) {
			first = w
		}
	}
	return first
}

// next returns the earliest deadline after now, and whether there is one.
func (c *simClock) next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	found := false
	for w := range c.waiters {
		if w.at.After(c.now) && (!found || w.at.Before(next)) {
			next, found = w.at, true
		}
	}
	return next, found
}

// Step moves the clock forward by d and fires every timer that is then
// due, one at a time in deadline-then-arming order, settling after each.
// A timer armed by a woken goroutine that is due already fires in the same
// Step, after those armed before it.
func (c *simClock) Step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	for c.fireOne() {
		if c.settle != nil {
			c.settle()
		}
	}
}

// fireOne fires the earliest due timer, if any.
func (c *simClock) fireOne() bool {
	c.mu.Lock()
	w := c.earliestLocked()
	if w == nil || w.at.After(c.now) {
		c.mu.Unlock()
		return false
	}
	delete(c.waiters, w)
	now := c.now
	if w.period > 0 {
		// A ticker's next tick counts from this one, as a real ticker's
		// does; ticks missed by a long step are dropped, not queued.
		next := w.at.Add(w.period)
		if !next.After(now) {
			next = now.Add(w.period)
		}
		c.armed++
		w.at, w.seq = next, c.armed
		c.waiters[w] = struct{}{}
	}
	c.mu.Unlock()
	if w.fn != nil {
		go w.fn()
		return true
	}
	select {
	case w.ch <- now:
	default: // an unread tick is dropped, as by a real ticker
	}
	return true
}

// After implements clock.Clock.
func (c *simClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// NewTimer implements clock.Clock.
func (c *simClock) NewTimer(d time.Duration) clock.Timer {
	t := &simTimer{c: c, w: &simWaiter{ch: make(chan time.Time, 1)}}
	c.arm(t.w, d)
	return t
}

// AfterFunc implements clock.WithDelayedExecution: f runs on a goroutine
// of its own when the timer fires.
func (c *simClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &simTimer{c: c, w: &simWaiter{fn: f}}
	c.arm(t.w, d)
	return t
}

// NewTicker implements clock.WithTicker.
func (c *simClock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("sim: non-positive ticker period")
	}
	t := &simTicker{c: c, w: &simWaiter{ch: make(chan time.Time, 1), period: d}}
	c.arm(t.w, d)
	return t
}

// Tick implements clock.Clock.
func (c *simClock) Tick(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return c.NewTicker(d).C()
}

// Sleep blocks until the clock has been stepped past d. (A fake clock's
// Sleep that stepped the clock itself would take that from the world.)
func (c *simClock) Sleep(d time.Duration) { <-c.After(d) }

// simTimer is a timer of simClock.
type simTimer struct {
	c *simClock
	w *simWaiter
}

func (t *simTimer) C() <-chan time.Time { return t.w.ch }

func (t *simTimer) Stop() bool { return t.c.disarm(t.w) }

// simTicker is a ticker of simClock.
type simTicker struct {
	c *simClock
	w *simWaiter
}

func (t *simTicker) C() <-chan time.Time { return t.w.ch }

func (t *simTicker) Stop() { t.c.disarm(t.w) }

func (t *simTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, was := t.c.waiters[t.w]
	t.c.armLocked(t.w, d)
	return was
}
