package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/meshd-io/meshd/internal/ledger"
)

// Tracker is a ledger of run-function intervals that can be waited on.
type Tracker struct {
	Ledger ledger.Ledger

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every start and stop
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{changed: make(chan struct{})} }

// Work is a run function that records its term of election as holder and
// does nothing else until its context ends.
func (t *Tracker) Work(election, holder string) func(ctx context.Context) {
	recorded := t.Ledger.Wrap(election, holder, func(ctx context.Context) {
		t.notify()
		<-ctx.Done()
	})
	return func(ctx context.Context) {
		recorded(ctx)
		t.notify()
	}
}

func (t *Tracker) notify() {
	t.mu.Lock()
	defer t.mu.Unlock()
	close(t.changed)
	t.changed = make(chan struct{})
}

// errTimeout is wrapped by every wait that ran out of time.
var errTimeout = errors.New("timed out")

// WaitFor waits until match finds an interval and returns it.
func (t *Tracker) WaitFor(timeout time.Duration, what string, match func(ledger.Interval) bool) (ledger.Interval, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		changed := t.changed
		t.mu.Unlock()
		for _, iv := range t.Ledger.Intervals() {
			if match(iv) {
				return iv, nil
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			return ledger.Interval{}, fmt.Errorf("%w after %v waiting for %s", errTimeout, timeout, what)
		}
	}
}

// Overlap summarises the overlaps of one implementation's elections.
type Overlap struct {
	// Pairs is how many pairs of intervals overlapped.
	Pairs int
	Total time.Duration
	Max   time.Duration
}

// Overlap sums the overlaps recorded in the ledger.
func (t *Tracker) Overlap() Overlap {
	var o Overlap
	for _, x := range t.Ledger.Overlaps() {
		o.Pairs++
		o.Total += x.Duration
		o.Max = max(o.Max, x.Duration)
	}
	return o
}

// waitUntil polls cond every 5ms until it holds or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %v waiting for %s", errTimeout, timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
