package sim

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// Faults added to the schedules after the first ones: wall-clock steps,
// targeted failures of protocol writes, watches that resume with a
// coalesced burst, and candidates that leave while they are preferred:
// when they ask for the lock, when their request is accepted, or as soon
// as they have taken it. A generator draws them after every
// other choice of its schedule, so that a seed named before they existed
// (classicSeed, sessionSeed) draws the same schedule without them.

// extraFaults draws none, one or two of these faults; sessions adds the
// session's writes to the targets of write failures.
func (g *generator) extraFaults(sessions bool) {
	for k := g.r.Intn(3); k > 0; k-- {
		at := time.Second + time.Duration(g.r.Int63n(int64(g.s.Duration-4*time.Second)))
		switch g.r.Intn(4) {
		case 0:
			g.wallStep(at)
		case 1:
			g.failWrites(at, sessions)
		case 2:
			g.coalescedBurst(at)
		default:
			g.leaveWhilePreferred(at)
		}
	}
}

// maxWallStep is the largest step of a wall clock drawn: beyond twice the
// lease.
func (g *generator) maxWallStep() time.Duration {
	return 2*g.s.Timing.LeaseDuration + time.Second
}

// wallStep steps a candidate's wall clock forward or back by whole seconds
// (from one second to beyond twice the lease), and sometimes back again
// later, as a clock corrected by hand and then by NTP.
func (g *generator) wallStep(at time.Duration) {
	name := g.pick()
	secs := 1 + g.r.Int63n(int64(g.maxWallStep()/time.Second))
	d := time.Duration(secs) * time.Second
	if g.r.Intn(2) == 0 {
		d = -d
	}
	back := time.Duration(0)
	if g.r.Intn(2) == 0 {
		back = g.dur(time.Second, 4*time.Second)
	}
	g.add(at, fmt.Sprintf("wall clock of %s steps by %v", name, d), func(w *World) {
		w.StepWall(name, d)
		if back > 0 {
			w.After(back, fmt.Sprintf("wall clock of %s steps by %v, back", name, -d), func(w *World) { w.StepWall(name, -d) })
		}
	})
}

// failWrites arms a targeted failure of the next one to three writes of
// one kind of the handover (and session) protocols by a candidate.
func (g *generator) failWrites(at time.Duration, sessions bool) {
	kinds := []string{WriteRequest, WriteAnswer, WriteSuccessor}
	if sessions {
		kinds = WriteKinds
	}
	name, kind, n := g.pick(), kinds[g.r.Intn(len(kinds))], 1+g.r.Intn(3)
	lost := g.r.Intn(3) == 0
	g.add(at, fmt.Sprintf("the next %d %s writes of %s fail (lost reply %v)", n, kind, name, lost), func(w *World) {
		w.FailWrites(name, kind, n, lost)
	})
}

// coalescedBurst makes a candidate's watches lag and, when the lag ends,
// deliver what queued up as one burst in which, of several changes of one
// object in a row, only the newest arrives.
func (g *generator) coalescedBurst(at time.Duration) {
	name, d, lag := g.pick(), g.dur(time.Second, 4*time.Second), g.dur(500*time.Millisecond, 3*time.Second)
	g.add(at, fmt.Sprintf("watch of %s lags %v, then resumes with a coalesced burst", name, lag), func(w *World) {
		w.Loosen()
		w.CoalescedBurst(name, lag, d)
	})
}

// leaveWhilePreferred makes a candidate leave (crash, or stop gracefully)
// at the instant the lock shows its handover request pending (it outranks
// the holder and asked) or accepted (the holder is stopping for it), or
// shows it as the new holder (it took the lock, by force or handed over,
// and its work has not started or just did), and come back under a new
// identity a little later, except in a mixed election.
func (g *generator) leaveWhilePreferred(at time.Duration) {
	name := g.pick()
	when := []string{leavePending, leaveAccepted, leaveTaken}[g.r.Intn(3)]
	crash := g.r.Intn(2) == 0
	back := g.dur(500*time.Millisecond, 3*time.Second)
	again := ""
	if !g.mixed {
		g.restarts++
		again = fmt.Sprintf("%s-r%d", name, g.restarts)
	}
	g.add(at, fmt.Sprintf("%s leaves (crash %v) once %s", name, crash, leaveWhen(name, when)), func(w *World) {
		w.LeaveWhen(name, when, crash, back, again)
	})
}

// When a candidate leaves (World.LeaveWhen).
const (
	leavePending  = "pending"  // its request is written, unanswered
	leaveAccepted = "accepted" // the holder accepted its request
	leaveTaken    = "taken"    // the record names it, after another holder
)

func leaveWhen(name, when string) string {
	if when == leaveTaken {
		return name + " has taken the lock"
	}
	return name + "'s request is " + when
}

// LeaveWhen makes candidate name leave (crash, or stop gracefully) at the
// first write of the lock after now that shows the moment when names
// (leavePending, leaveAccepted or leaveTaken), and starts a new process
// under the identity again back later, unless again is empty.
func (w *World) LeaveWhen(name, when string, crash bool, back time.Duration, again string) {
	last := ""
	if recs := w.Records(); len(recs) > 0 {
		last = recs[len(recs)-1].Holder
	}
	w.When(leaveWhen(name, when), func(r Record) bool {
		prev := last
		if !r.Deleted {
			last = r.Holder
		}
		h := r.Handover
		switch when {
		case leaveTaken:
			return r.Holder == name && prev != name && prev != ""
		case leaveAccepted:
			return h.Candidate == name && r.Holder != name && h.Answer == lockmeta.AnswerAccepted
		default:
			return h.Candidate == name && r.Holder != name && h.Answer == ""
		}
	}, func(w *World) {
		c := w.find(name)
		if c == nil || !c.alive() {
			return
		}
		if crash {
			c.crash()
		} else {
			c.stop()
		}
		w.noteFault()
		w.mu.Lock()
		if w.left == nil {
			w.left = map[string]time.Duration{}
		}
		w.left[name] = w.Now()
		w.mu.Unlock()
		if again != "" {
			w.After(back, "restart "+again, func(w *World) { w.Restart(name, again) })
		}
	})
}

// StepWall moves the wall clock of the actor named name by d (see
// wallclock.go).
func (w *World) StepWall(name string, d time.Duration) {
	w.noteFault()
	off := w.state(name).stepWall(d)
	w.j.logf("wall clock of %s is %v off", name, off)
}

// CoalescedBurst makes the watches of the actor named name lag by lag for
// d; when the lag ends, what queued up is delivered at once, and of
// several changes of one object in a row only the newest arrives, as a
// reader that looks only after the burst sees them.
func (w *World) CoalescedBurst(name string, lag, d time.Duration) {
	w.Fault("coalesced burst on the watch of "+name, d, func(w *World) {
		st := w.state(name)
		st.setLag(lag)
		st.setCoalesce(true)
	}, func(w *World) {
		st := w.state(name)
		st.setLag(0)
		// The burst goes out in this step; coalescing ends after it.
		w.After(time.Millisecond, "end of coalescing on the watch of "+name, func(w *World) { st.setCoalesce(false) })
	})
}

// Left reports when candidate name left by LeaveWhen, and whether it did.
func (w *World) Left(name string) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.left[name]
	return at, ok
}

// trigger is an action that runs as soon as a write of the lock matches.
type trigger struct {
	name string
	cond func(Record) bool
	do   func(*World)
	from int // the first record it looks at
	done bool
}

// When runs do, once, as soon as a write of the lock object after now
// satisfies cond: in the same simulated instant, before time passes.
func (w *World) When(name string, cond func(Record) bool, do func(*World)) {
	w.mu.Lock()
	from := len(w.records)
	w.mu.Unlock()
	w.triggers = append(w.triggers, &trigger{name: name, cond: cond, do: do, from: from})
}

// fireTriggers runs the triggers whose condition a write has met, in the
// order they were set, settling after each.
func (w *World) fireTriggers() {
	for _, t := range w.triggers {
		if t.done {
			continue
		}
		recs := w.Records()
		for i := t.from; i < len(recs); i++ {
			if t.cond(recs[i]) {
				t.done = true
				w.j.logf("trigger: %s", t.name)
				t.do(w)
				w.settle()
				break
			}
		}
		if !t.done {
			t.from = len(recs)
		}
	}
}

// setCoalesce switches coalescing of the actor's watch deliveries.
func (s *actorState) setCoalesce(v bool) { s.mu.Lock(); s.coalesce = v; s.mu.Unlock() }

func (s *actorState) coalescing() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.coalesce }

func (s *actorState) noteCoalesced() { s.mu.Lock(); s.coalesced++; s.mu.Unlock() }

// coalescedEvents is how many watch events a coalesced burst left out.
func (s *actorState) coalescedEvents() int { s.mu.Lock(); defer s.mu.Unlock(); return s.coalesced }

// dropSuperseded drops, while the actor coalesces, the due change at the
// head of the queue when the next event, also due, changes the same
// object: a reader that looks only after the burst sees the newest of the
// two. Only neighbours coalesce: a change of another object in between
// keeps both, since a watch delivers in order and a reader may rely on
// having seen every change written before the one it reads (the echo rule
// of sessions does). w.mu is held.
func (w *simWatcher) dropSuperseded(now time.Time) {
	if !w.actor.coalescing() {
		return
	}
	lag := w.actor.watchLag()
	due := func(ev apiEvent) bool { return !ev.at.Add(lag).After(now) }
	for len(w.queue) > 1 {
		first, next := w.queue[0], w.queue[1]
		if first.typ != watch.Modified || next.typ != watch.Modified || !due(next) || objectName(first) != objectName(next) {
			return
		}
		w.queue = w.queue[1:]
		w.actor.noteCoalesced()
	}
}

func objectName(ev apiEvent) string {
	m, err := meta.Accessor(ev.obj)
	if err != nil {
		return ""
	}
	return m.GetName()
}
