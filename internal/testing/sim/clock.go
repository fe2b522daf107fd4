package sim

import (
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// simClock is a FakeClock that also remembers when its timers are due, so
// that the world can step straight to the next one instead of in fixed
// quanta. Deadlines of timers that were stopped stay in the list; they cost
// one step that wakes nobody.
type simClock struct {
	*clocktesting.FakeClock

	mu        sync.Mutex
	deadlines []time.Time
}

var _ clock.WithTicker = (*simClock)(nil)

func newSimClock(t0 time.Time) *simClock {
	return &simClock{FakeClock: clocktesting.NewFakeClock(t0)}
}

func (c *simClock) note(d time.Duration) {
	if d < 0 {
		d = 0
	}
	c.mu.Lock()
	c.deadlines = append(c.deadlines, c.Now().Add(d))
	c.mu.Unlock()
}

// next returns the earliest deadline after now, and whether there is one.
// Deadlines at or before now are dropped.
func (c *simClock) next() (time.Time, bool) {
	now := c.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.deadlines[:0]
	for _, d := range c.deadlines {
		if d.After(now) {
			kept = append(kept, d)
		}
	}
	c.deadlines = kept
	if len(kept) == 0 {
		return time.Time{}, false
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].Before(kept[j]) })
	return kept[0], true
}

// After implements clock.Clock.
func (c *simClock) After(d time.Duration) <-chan time.Time {
	c.note(d)
	return c.FakeClock.After(d)
}

// NewTimer implements clock.Clock.
func (c *simClock) NewTimer(d time.Duration) clock.Timer {
	c.note(d)
	return &simTimer{Timer: c.FakeClock.NewTimer(d), c: c}
}

// AfterFunc implements clock.Clock.
func (c *simClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.note(d)
	return &simTimer{Timer: c.FakeClock.AfterFunc(d, f), c: c}
}

// NewTicker implements clock.WithTicker. Only the first tick is noted; later
// ticks are found by the world's maximum step.
func (c *simClock) NewTicker(d time.Duration) clock.Ticker {
	c.note(d)
	return c.FakeClock.NewTicker(d)
}

// Tick implements clock.Clock.
func (c *simClock) Tick(d time.Duration) <-chan time.Time {
	c.note(d)
	return c.FakeClock.Tick(d)
}

// Sleep blocks until the clock has been stepped past d. (FakeClock.Sleep
// would step the clock itself, which only the world may do.)
func (c *simClock) Sleep(d time.Duration) {
	<-c.After(d)
}

type simTimer struct {
	clock.Timer
	c *simClock
}

func (t *simTimer) Reset(d time.Duration) bool {
	t.c.note(d)
	return t.Timer.Reset(d)
}
