// Package ledger records when each holder's run functions ran, so that tests
// and benchmarks can check the one property leader election exists for: two
// holders of one election never run their work at the same time.
package ledger

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Interval is one term of work of one holder. Stop is zero while it runs.
type Interval struct {
	Election string
	Holder   string
	Start    time.Time
	Stop     time.Time
}

// Overlap is a stretch of time in which two holders of one election both
// ran their work.
type Overlap struct {
	Election string
	A, B     string
	Duration time.Duration
}

// Ledger is safe for concurrent use. Times come from one process's
// monotonic clock, so intervals of different goroutines compare exactly.
type Ledger struct {
	mu        sync.Mutex
	intervals []Interval
}

// Wrap returns f with its runs recorded as intervals of holder in election.
func (l *Ledger) Wrap(election, holder string, f func(ctx context.Context)) func(ctx context.Context) {
	return func(ctx context.Context) {
		i := l.start(election, holder)
		defer l.stop(i)
		f(ctx)
	}
}

func (l *Ledger) start(election, holder string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.intervals = append(l.intervals, Interval{Election: election, Holder: holder, Start: time.Now()})
	return len(l.intervals) - 1
}

func (l *Ledger) stop(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.intervals[i].Stop = time.Now()
}

// Intervals returns a copy of everything recorded, in start order.
func (l *Ledger) Intervals() []Interval {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]Interval(nil), l.intervals...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Starts counts the terms recorded for election.
func (l *Ledger) Starts(election string) int {
	n := 0
	for _, iv := range l.Intervals() {
		if iv.Election == election {
			n++
		}
	}
	return n
}

// Overlaps lists every pair of intervals of one election, of different
// holders, that share time. An interval still open counts as running until
// now.
func (l *Ledger) Overlaps() []Overlap {
	ivs := l.Intervals()
	now := time.Now()
	var out []Overlap
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			a, b := ivs[i], ivs[j]
			if a.Election != b.Election || a.Holder == b.Holder {
				continue
			}
			if d := shared(a, b, now); d > 0 {
				out = append(out, Overlap{Election: a.Election, A: a.Holder, B: b.Holder, Duration: d})
			}
		}
	}
	return out
}

// TotalOverlap sums Overlaps.
func (l *Ledger) TotalOverlap() time.Duration {
	var d time.Duration
	for _, o := range l.Overlaps() {
		d += o.Duration
	}
	return d
}

func shared(a, b Interval, now time.Time) time.Duration {
	end := func(iv Interval) time.Time {
		if iv.Stop.IsZero() {
			return now
		}
		return iv.Stop
	}
	start := a.Start
	if b.Start.After(start) {
		start = b.Start
	}
	stop := end(a)
	if e := end(b); e.Before(stop) {
		stop = e
	}
	return stop.Sub(start)
}
