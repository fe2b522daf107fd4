package sim

import (
	"fmt"
	"math/rand"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// GenerateSessions returns the random schedule of seed in session mode:
// like Generate, but every meshd candidate watches a Lease lock and has a
// session (CandidateSpec.Session), and the happenings include faults of
// sessions: deletion of a session Lease, failures of the session's calls
// while the lock's work (and the other way round), and crashes of a
// process that comes back under its own identity (same session Lease, new
// token). Lagging and broken watches hit the session Leases with the
// lock, since both ride the process's one watch of Leases, in order. In
// one schedule of five a holder of client-go's shape holds the lock first
// (every candidate starts after its first attempt), so the election is mixed: the
// candidates see a holder without a session mark and renew their records
// themselves.
//
// Its configuration is drawn last, as Generate's, from the accepted
// combinations with sessions.
func GenerateSessions(seed int64) Schedule {
	g := newSessions(seed, true)
	g.configure(combinationFor(seed, true), combinationsOf(true), true)
	return *g.s
}

// generateSessions is GenerateSessions without the configuration drawn
// last; without extra it also leaves out the faults of extraFault (see
// generateClassic).
func generateSessions(seed int64, extra bool) Schedule { return *newSessions(seed, extra).s }

// newSessions draws the schedule of generateSessions and returns its
// generator.
func newSessions(seed int64, extra bool) *generator {
	r := rand.New(rand.NewSource(seed))
	g := &generator{r: r, truth: revisions[r.Intn(2)]}
	g.initialTruth = g.truth
	s := Schedule{
		Name: fmt.Sprintf("session seed %d", seed), Seed: seed, Namespace: Namespace, LockName: LockName,
		LockKind: resourcelock.LeasesResourceLock, Timing: DefaultTiming(),
		Duration:        time.Duration(12+r.Intn(9)) * time.Second,
		TransitionSlack: TransitionSlack,
	}
	g.s = &s
	if r.Intn(5) == 0 {
		s.Timing = smallTiming()
	}
	mixed := r.Intn(5) == 0
	if mixed {
		// The holder of client-go's shape holds the lock when the schedule
		// begins (its record is there; it renews it at its first attempt),
		// with the default revision's key, so that no candidate outranks it
		// before the default first changes: every candidate sees it hold.
		s.Istiods = append(s.Istiods, IstiodSpec{Name: "istiod-0", Key: g.truth})
		s.Setup = func(w *World) error { return w.writeRecord("istiod-0", g.s.Istiods[0].Key) }
	}
	n := 2 + r.Intn(3)
	for i := 0; i < n; i++ {
		c := CandidateSpec{
			Name:        fmt.Sprintf("meshd-%d", i),
			Revision:    revisions[r.Intn(2)],
			Remote:      r.Intn(4) == 0,
			View:        g.truth,
			Watch:       true,
			Session:     true,
			Cooperative: r.Intn(4) != 0,
			Work:        WorkSpec{Drain: g.drain()},
			StartAt:     time.Duration(r.Intn(1000)) * time.Millisecond,
		}
		s.Candidates = append(s.Candidates, c)
		g.names = append(g.names, c.Name)
	}
	for k := 2 + r.Intn(5); k > 0; k-- {
		at := time.Second + time.Duration(r.Int63n(int64(s.Duration-4*time.Second)))
		g.sessionEvent(at, mixed)
	}
	if extra {
		g.mixed = mixed
		g.extraFaults(true)
	}
	return g
}

// writeRecord writes a lock object whose record names holder with key,
// renewed now, as a holder running before the schedule began left it.
func (w *World) writeRecord(holder, key string) error {
	now := metav1.NewMicroTime(w.clock.Now())
	rec := resourcelock.Record{HolderIdentity: holder, HolderKey: key,
		LeaseDurationSeconds: int(w.sched.Timing.LeaseDuration / time.Second)}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: w.sched.LockName, Namespace: w.sched.Namespace}}
	resourcelock.ApplyRecordToLease(rec, lease)
	lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
	return w.api.putLock(leases, lease, false)
}

// sessionEvent adds one random happening at time at: a fault of sessions
// in about half the cases, otherwise any happening of Generate. A mixed
// election has no restarts: a new process has not seen the holder of
// client-go's shape hold, so it would name its session (see the
// limits in package session's documentation).
func (g *generator) sessionEvent(at time.Duration, mixed bool) {
	k := g.r.Intn(10)
	for mixed && (k == 3 || k >= 5) {
		if k >= 5 {
			g.mixedEvent(at)
			return
		}
		k = g.r.Intn(10)
	}
	switch k {
	case 0:
		g.deleteSession(at)
	case 1:
		g.objectDown(at, true)
	case 2:
		g.objectDown(at, false)
	case 3:
		g.crashSameIdentity(at)
	case 4:
		g.watchFault(at)
	default:
		g.event(at)
	}
}

// mixedEvent is a happening of Generate other than a crash or a stop.
func (g *generator) mixedEvent(at time.Duration) {
	for {
		before := len(g.s.Actions)
		names, restarts := len(g.names), g.restarts
		g.event(at)
		if g.restarts == restarts {
			return
		}
		// A crash or stop was drawn: take it back and draw again.
		g.s.Actions, g.names, g.restarts = g.s.Actions[:before], g.names[:names], restarts
	}
}

// deleteSession deletes a candidate's session Lease, once or a few times
// in a row, as an operator or a garbage collector might.
func (g *generator) deleteSession(at time.Duration) {
	name, n := g.pick(), 1+g.r.Intn(3)
	for i := 0; i < n; i++ {
		gap := g.dur(100*time.Millisecond, 2*time.Second)
		g.add(at, "delete the session Lease of "+name, func(w *World) { w.DeleteSession(name) })
		at += gap
	}
}

// objectDown makes a candidate's calls on its session Lease fail while its
// lock calls work (session), or the other way round.
func (g *generator) objectDown(at time.Duration, sessionSide bool) {
	name, d := g.pick(), g.dur(500*time.Millisecond, 4*time.Second)
	if sessionSide {
		g.add(at, fmt.Sprintf("session calls of %s fail for %v", name, d), func(w *World) {
			w.Fault("session calls of "+name+" fail", d, func(w *World) { w.state(name).setSessionDown(true) },
				func(w *World) { w.state(name).setSessionDown(false) })
		})
		return
	}
	g.add(at, fmt.Sprintf("lock calls of %s fail for %v", name, d), func(w *World) {
		w.Loosen()
		w.Fault("lock calls of "+name+" fail", d, func(w *World) { w.state(name).setLockDown(true) },
			func(w *World) { w.state(name).setLockDown(false) })
	})
}

// crashSameIdentity crashes a candidate, which comes back under its own
// identity: the same session Lease, written with a new token.
func (g *generator) crashSameIdentity(at time.Duration) {
	name, back := g.pick(), g.dur(300*time.Millisecond, 3*time.Second)
	g.add(at, fmt.Sprintf("crash %s, back under its own identity after %v", name, back), func(w *World) {
		c := w.find(name)
		if c == nil || !c.alive() {
			return
		}
		c.crash()
		w.noteFault()
		w.After(back, "restart "+name, func(w *World) { w.Restart(name, name) })
	})
}

// SessionLeaseName is the name of the session Lease of the candidate
// named name in this schedule.
func (w *World) SessionLeaseName(name string) string {
	return session.LeaseName(name, w.sched.Timing.LeaseDuration)
}

// DeleteSession deletes the session Lease of candidate name, if it has one.
func (w *World) DeleteSession(name string) {
	c := w.find(name)
	if c == nil || !c.spec.Session {
		return
	}
	w.noteFault()
	if err := w.api.deleteLock(leases, w.SessionLeaseName(name)); err != nil {
		w.j.logf("delete failed: %v", err)
	}
}

// sessionHolderQuiet: a holder whose session works leaves its record
// alone. Two candidates of one revision with sessions and no fault: the
// holder writes its record when it takes the lock (and at most once more,
// if its first write came before its first heartbeat was echoed), the
// follower never takes the lock, and after the holder crashes the follower
// takes it once the session has run out by its observation.
func sessionHolderQuiet() Scenario {
	s := base("session-holder-quiet", resourcelock.LeasesResourceLock, 16*time.Second)
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "stable", "stable", 200*time.Millisecond)
	a.Session, b.Session = true, true
	s.Candidates = []CandidateSpec{a, b}
	crashAt := 10 * time.Second
	s.Actions = []Action{{At: crashAt, Name: "crash a", Do: func(w *World) { w.mustFind("a").crash(); w.noteFault() }}}
	s.Checks = []func(*World){func(w *World) {
		writes, tookAt := 0, time.Duration(-1)
		for _, r := range w.Records() {
			switch {
			case r.Writer == "a" && r.At < crashAt:
				writes++
			case r.Writer == "b" && r.Holder == "b" && tookAt < 0:
				tookAt = r.At
			}
		}
		if writes == 0 || writes > 2 {
			w.Violate("session", "a wrote its record %d times before it crashed; with a working session it writes it when it takes the lock, and at most once more", writes)
		}
		t := w.sched.Timing
		if tookAt < crashAt || tookAt > crashAt+t.LeaseDuration+2*t.RetryPeriod {
			w.Violate("session", "b took the lock at %v; a crashed at %v and its session runs out by b's observation within %v", tookAt, crashAt, t.LeaseDuration+t.RetryPeriod)
		}
	}}
	return Scenario{Name: s.Name, Case: "sessions: a holder renewed by its session does not rewrite its record", Schedule: s}
}
