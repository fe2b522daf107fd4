package sim

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Violation is one broken invariant.
type Violation struct {
	// At is the simulated time since the schedule started.
	At time.Duration
	// Invariant names what broke: "overlap", "transitions", "leaderless",
	// "stuck", or a scenario's own check.
	Invariant string
	Detail    string
}

func (v Violation) String() string {
	return fmt.Sprintf("%v %s: %s", v.At, v.Invariant, v.Detail)
}

// maxTrace bounds the trace kept for a failure report.
const maxTrace = 4000

// journal collects the trace of a run and its violations.
type journal struct {
	t0    time.Time
	clock *simClock

	mu         sync.Mutex
	lines      []string
	violations []Violation
	seen       map[string]bool
}

func newJournal(clk *simClock) *journal {
	return &journal{t0: clk.Now(), clock: clk, seen: map[string]bool{}}
}

func (j *journal) since() time.Duration { return j.clock.Since(j.t0) }

func (j *journal) logf(format string, args ...any) {
	line := fmt.Sprintf("%8v  ", j.since()) + fmt.Sprintf(format, args...)
	j.mu.Lock()
	if len(j.lines) < maxTrace {
		j.lines = append(j.lines, line)
	}
	j.mu.Unlock()
}

// violate records a violation; repeats of the same invariant and detail
// are recorded once.
func (j *journal) violate(invariant, format string, args ...any) {
	v := Violation{At: j.since(), Invariant: invariant, Detail: fmt.Sprintf(format, args...)}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.seen[invariant+v.Detail] {
		return
	}
	j.seen[invariant+v.Detail] = true
	j.violations = append(j.violations, v)
	if len(j.lines) < maxTrace {
		j.lines = append(j.lines, fmt.Sprintf("%8v  VIOLATION %s", v.At, v))
	}
}

func (j *journal) result() ([]Violation, string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Violation(nil), j.violations...), strings.Join(j.lines, "\n")
}

// ledger tracks the work of every actor: when each term's work started and
// when it really ended (the actor's own end of work, not the elector's
// belief). It checks the first invariant as work starts: never two actors'
// work of one election at once.
type ledger struct {
	j *journal

	mu       sync.Mutex
	next     int
	active   map[int]work
	lastBusy time.Time // when work last ran (or the schedule started)
	starts   int
	history  map[int]*Interval
	order    []int
	// excuse tells why an overlap of starter's new work with work w is
	// beyond what meshd can prevent, or "" when it is not (see
	// World.excuse).
	excuse func(w work, starter string, now time.Time) string
}

type work struct {
	actor     string
	since     time.Time
	cancelled time.Time // when the work was told to stop; zero before
}

// Interval is one term's work of one actor, in simulated time since the
// schedule started; End is negative while the work runs.
type Interval struct {
	Actor      string
	Start, End time.Duration
}

func newLedger(j *journal) *ledger {
	return &ledger{j: j, active: map[int]work{}, lastBusy: j.clock.Now(), history: map[int]*Interval{}}
}

// start records that actor's work started now and returns its ticket.
func (l *ledger) start(actor string) int {
	now := l.j.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	tickets := make([]int, 0, len(l.active))
	for t := range l.active {
		tickets = append(tickets, t)
	}
	sort.Ints(tickets)
	for _, t := range tickets {
		w := l.active[t]
		if why := l.excuseOf(w, actor, now); why != "" {
			l.j.logf("overlap excused: %s started work while %s still works: %s", actor, w.actor, why)
			continue
		}
		l.j.violate("overlap", "%s started work while %s has been working since %v",
			actor, w.actor, w.since.Sub(l.j.t0))
	}
	l.next++
	l.starts++
	l.active[l.next] = work{actor: actor, since: now}
	l.history[l.next] = &Interval{Actor: actor, Start: now.Sub(l.j.t0), End: -1}
	l.order = append(l.order, l.next)
	l.j.logf("work start %s", actor)
	return l.next
}

// excuseOf is l.excuse, or "" without one. Called with mu held.
func (l *ledger) excuseOf(w work, starter string, now time.Time) string {
	if l.excuse == nil {
		return ""
	}
	return l.excuse(w, starter, now)
}

// end records that the work of ticket ended now; ending twice is harmless.
func (l *ledger) end(ticket int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.active[ticket]
	if !ok {
		return
	}
	delete(l.active, ticket)
	l.lastBusy = l.j.clock.Now()
	l.history[ticket].End = l.lastBusy.Sub(l.j.t0)
	l.j.logf("work end   %s", w.actor)
}

// cancelled records that the work of ticket was told to stop now.
func (l *ledger) cancelled(ticket int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.active[ticket]; ok && w.cancelled.IsZero() {
		w.cancelled = l.j.clock.Now()
		l.active[ticket] = w
	}
}

// endActor ends every work of actor (its process died).
func (l *ledger) endActor(actor string) {
	l.mu.Lock()
	var tickets []int
	for t, w := range l.active {
		if w.actor == actor {
			tickets = append(tickets, t)
		}
	}
	l.mu.Unlock()
	sort.Ints(tickets)
	for _, t := range tickets {
		l.end(t)
	}
}

// intervals returns every term's work so far, in order of start.
func (l *ledger) intervals() []Interval {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Interval, 0, len(l.order))
	for _, t := range l.order {
		out = append(out, *l.history[t])
	}
	return out
}

// busy reports whether any work runs, and when work last ran.
func (l *ledger) busy() (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.active) > 0 {
		return true, l.j.clock.Now()
	}
	return false, l.lastBusy
}

// transitions counts changes of holder in the stored record and checks the
// second invariant: in any window of the run, at most window/RetryPeriod +
// slack changes, plus one for every actor that started in the window (an
// instance that arrives may preempt once on arrival, as istiod's do; what
// the bound catches is the same candidates taking the lock back and forth).
type transitions struct {
	j        *journal
	retry    time.Duration
	slack    int
	holder   string
	times    []time.Time
	reported bool

	mu    sync.Mutex
	joins []time.Time
}

// joined notes that an actor started (or restarted) now, or that a run
// function failed now: the contract ends the term of a holder whose run
// function fails, one change of holder more, which a coordinator or the
// steal rule may undo once the holder's back-off is over.
func (t *transitions) joined() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.joins = append(t.joins, t.j.clock.Now())
}

// joinsSince counts the actors that started at or after from.
func (t *transitions) joinsSince(from time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, at := range t.joins {
		if !at.Before(from) {
			n++
		}
	}
	return n
}

// observe notes the holder of a record just written ("" for none).
func (t *transitions) observe(holder string) {
	if holder == "" || holder == t.holder {
		if holder == "" {
			t.holder = ""
		}
		return
	}
	prev := t.holder
	t.holder = holder
	now := t.j.clock.Now()
	t.times = append(t.times, now)
	t.j.logf("record holder %s (was %q)", holder, prev)
	n := len(t.times)
	for i := 0; i < n; i++ {
		count := n - i
		allowed := int(now.Sub(t.times[i])/t.retry) + t.slack + t.joinsSince(t.times[i])
		if count > allowed && !t.reported {
			t.reported = true
			t.j.violate("transitions", "%d changes of holder within %v (at most %d allowed at one per RetryPeriod %v + %d)",
				count, now.Sub(t.times[i]), allowed, t.retry, t.slack)
			return
		}
	}
}
