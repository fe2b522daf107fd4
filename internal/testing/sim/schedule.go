package sim

import (
	"fmt"
	"math/rand"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Defaults of every schedule.
const (
	Namespace = "istio-system"
	LockName  = "istio-leader"
	// TransitionSlack is the constant of the transition bound: a new
	// election, a steal and a handover may come close together.
	TransitionSlack = 3
)

// DefaultTiming is a ttl of 4s split as package election does, with a stop
// timeout and handover grace that fit inside it.
func DefaultTiming() Timing {
	return Timing{
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		StopTimeout: time.Second, HandoverGrace: 2500 * time.Millisecond,
	}
}

// smallTiming is a ttl of 2s.
func smallTiming() Timing {
	return Timing{
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 500 * time.Millisecond,
		StopTimeout: 400 * time.Millisecond, HandoverGrace: 1200 * time.Millisecond,
	}
}

var revisions = []string{"stable", "canary"}

// generator builds a random schedule from a seed. Every choice comes from
// its own rand.Rand, so a seed always yields the same schedule.
type generator struct {
	r *rand.Rand
	s *Schedule
	// truth is the default revision as the webhook says it.
	truth string
	// names of the candidates, for faults aimed at one of them.
	names []string
	// restarts counts restarted processes, for fresh identities.
	restarts int
	// flips are the times of the changes of the default revision.
	flips []time.Duration
	// mixed: a holder of client-go's shape takes part in a session
	// schedule, which then has no restarts.
	mixed bool
	// initialTruth is the default revision when the schedule begins, and
	// flipTruths the default after each of flips.
	initialTruth string
	flipTruths   []string
}

// Generate returns the random schedule of seed: two to four meshd
// candidates of two revisions (local and remote, watching and polling,
// cooperative or not), sometimes a holder of client-go's shape, and a few
// faults and changes of the default revision over 12 to 20 simulated
// seconds, and (drawn after all of these, so that they leave the rest of
// the schedule as it was before they existed) the faults of extraFault.
//
// Last of all it gives the schedule its configuration (configure): the
// accepted combination of candidate meshd-0 is the seed's turn in the list
// of classic combinations (combinationFor), and the other candidates run
// combinations of the same election drawn at random.
func Generate(seed int64) Schedule {
	g := newClassic(seed, true)
	g.configure(combinationFor(seed, false), combinationsOf(false), true)
	return *g.s
}

// generateClassic is Generate without the configuration drawn last; without
// extra it also leaves out the faults of extraFault, as the schedules of
// seeds named before them were drawn.
func generateClassic(seed int64, extra bool) Schedule { return *newClassic(seed, extra).s }

// newClassic draws the schedule of generateClassic and returns its
// generator, which holds it.
func newClassic(seed int64, extra bool) *generator {
	r := rand.New(rand.NewSource(seed))
	g := &generator{r: r, truth: revisions[r.Intn(2)]}
	g.initialTruth = g.truth
	s := Schedule{
		Name: fmt.Sprintf("seed %d", seed), Seed: seed, Namespace: Namespace, LockName: LockName,
		LockKind: resourcelock.ConfigMapsResourceLock, Timing: DefaultTiming(),
		Duration:        time.Duration(12+r.Intn(9)) * time.Second,
		TransitionSlack: TransitionSlack,
	}
	g.s = &s
	if r.Intn(2) == 0 {
		s.LockKind = resourcelock.LeasesResourceLock
	}
	// A ConfigMap record keeps its times in whole seconds, so a renew within
	// the same second leaves the record unchanged and followers may time the
	// lease from up to a second early; with a RetryPeriod under a second that
	// uses up the whole tolerance. The small timing runs on Leases only (the
	// limit is in docs/handover.md).
	if r.Intn(5) == 0 && s.LockKind == resourcelock.LeasesResourceLock {
		s.Timing = smallTiming()
	}
	if r.Intn(5) == 0 {
		s.Istiods = append(s.Istiods, IstiodSpec{Name: "istiod-0", Key: revisions[r.Intn(2)]})
	}
	n := 2 + r.Intn(3)
	for i := 0; i < n; i++ {
		c := CandidateSpec{
			Name:        fmt.Sprintf("meshd-%d", i),
			Revision:    revisions[r.Intn(2)],
			Remote:      r.Intn(4) == 0,
			View:        g.truth,
			Watch:       r.Intn(4) != 0,
			Cooperative: r.Intn(4) != 0,
			Work:        WorkSpec{Drain: g.drain()},
			StartAt:     time.Duration(r.Intn(1500)) * time.Millisecond,
		}
		s.Candidates = append(s.Candidates, c)
		g.names = append(g.names, c.Name)
	}
	for k := 2 + r.Intn(5); k > 0; k-- {
		at := time.Second + time.Duration(r.Int63n(int64(s.Duration-4*time.Second)))
		g.event(at)
	}
	if extra {
		g.extraFaults(false)
	}
	return g
}

// drain is a run function's stopping time: mostly quick, sometimes longer
// than the stop timeout.
func (g *generator) drain() time.Duration {
	t := g.s.Timing
	switch g.r.Intn(6) {
	case 0:
		return 0
	case 1:
		return t.StopTimeout + time.Duration(g.r.Int63n(int64(t.StopTimeout)))
	default:
		return time.Duration(g.r.Int63n(int64(t.StopTimeout / 2)))
	}
}

// dur is a random duration in [lo, hi].
func (g *generator) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(g.r.Int63n(int64(hi-lo)+1))
}

func (g *generator) pick() string { return g.names[g.r.Intn(len(g.names))] }

func (g *generator) add(at time.Duration, name string, do func(w *World)) {
	g.s.Actions = append(g.s.Actions, Action{At: at, Name: name, Do: do})
}

// event adds one random happening at time at.
func (g *generator) event(at time.Duration) {
	switch g.r.Intn(12) {
	case 0, 1:
		g.flip(at)
	case 2:
		g.apiErrors(at)
	case 3:
		g.watchFault(at)
	case 4:
		g.pause(at)
	case 5:
		g.conflicts(at)
	case 6:
		g.objectFault(at)
	case 7:
		g.crashOrStop(at)
	case 8, 9:
		g.workFault(at)
	default:
		g.flip(at)
	}
}

// flip changes the default revision; every candidate sees it after its
// own delay, and sometimes one sees it only much later (a stuck watcher).
// Changes come at least a lease apart, as a person or a rollout makes them:
// each may move the lock legitimately, and the transition bound counts on
// them being rare.
func (g *generator) flip(at time.Duration) {
	for _, f := range g.flips {
		if d := at - f; d < g.s.Timing.LeaseDuration && d > -g.s.Timing.LeaseDuration {
			return
		}
	}
	g.flips = append(g.flips, at)
	g.truth = revisions[1-indexOf(revisions, g.truth)]
	g.flipTruths = append(g.flipTruths, g.truth)
	rev := g.truth
	stuck := ""
	if g.r.Intn(4) == 0 {
		stuck = g.pick()
	}
	for _, name := range g.names {
		d := g.dur(0, 1500*time.Millisecond)
		if name == stuck {
			d = g.dur(3*time.Second, 8*time.Second)
		}
		name := name
		g.add(at+d, fmt.Sprintf("%s sees default %s", name, rev), func(w *World) { w.SetView(name, rev) })
	}
}

func (g *generator) apiErrors(at time.Duration) {
	name, d := g.pick(), g.dur(300*time.Millisecond, 3*time.Second)
	mode := errInternal
	if g.r.Intn(2) == 0 {
		mode = errTimeout
	}
	g.add(at, fmt.Sprintf("API errors (mode %d) for %s", mode, name), func(w *World) {
		w.Loosen()
		w.Fault("API errors for "+name, d, func(w *World) { w.state(name).setMode(mode) },
			func(w *World) { w.state(name).setMode(errNone) })
	})
}

func (g *generator) watchFault(at time.Duration) {
	name, d := g.pick(), g.dur(time.Second, 4*time.Second)
	if g.r.Intn(2) == 0 {
		lag := g.dur(100*time.Millisecond, 2*time.Second)
		g.add(at, fmt.Sprintf("watch of %s lags %v", name, lag), func(w *World) {
			w.Loosen()
			w.Fault("watch lag of "+name, d, func(w *World) { w.state(name).setLag(lag) },
				func(w *World) { w.state(name).setLag(0) })
		})
		return
	}
	g.add(at, "watch of "+name+" breaks", func(w *World) {
		w.Loosen()
		w.Fault("broken watch of "+name, d, func(w *World) { w.breakWatch(name) },
			func(w *World) { w.state(name).setWatchBroken(false) })
	})
}

func (g *generator) pause(at time.Duration) {
	name, d := g.pick(), g.dur(200*time.Millisecond, 3*time.Second)
	g.add(at, "pause "+name, func(w *World) {
		w.Loosen()
		w.Fault("pause of "+name, d, func(w *World) { w.state(name).pause() },
			func(w *World) { w.state(name).unpause() })
	})
}

func (g *generator) conflicts(at time.Duration) {
	name, n := g.pick(), 1+g.r.Intn(3)
	lost := g.r.Intn(3) == 0
	g.add(at, fmt.Sprintf("%d injected conflicts (lost reply %v) for %s", n, lost, name), func(w *World) {
		w.noteFault()
		w.state(name).addConflicts(n)
		if lost {
			w.state(name).addLostReplies(1)
		}
	})
}

func (g *generator) objectFault(at time.Duration) {
	switch g.r.Intn(3) {
	case 0:
		g.add(at, "delete and re-create the lock without a record", func(w *World) { w.Recreate() })
	default:
		n := 1 + g.r.Intn(4)
		for i := 0; i < n; i++ {
			label := g.r.Intn(2) == 0
			g.add(at+time.Duration(i)*700*time.Millisecond, "foreign write on the lock", func(w *World) {
				w.ForeignWrite(label)
			})
		}
	}
}

func (g *generator) crashOrStop(at time.Duration) {
	name := g.pick()
	crash := g.r.Intn(2) == 0
	back := g.dur(500*time.Millisecond, 3*time.Second)
	g.restarts++
	again := fmt.Sprintf("%s-r%d", name, g.restarts)
	g.add(at, fmt.Sprintf("stop %s (crash %v), back as %s after %v", name, crash, again, back), func(w *World) {
		c := w.find(name)
		if c == nil {
			return
		}
		if crash {
			c.crash()
		} else {
			c.stop()
		}
		w.noteFault()
		w.After(back, "restart "+again, func(w *World) { w.Restart(name, again) })
	})
	// Later faults aimed at name reach the new process once it runs.
	g.names = append(g.names, again)
}

func (g *generator) workFault(at time.Duration) {
	name := g.pick()
	t := g.s.Timing
	switch g.r.Intn(3) {
	case 0:
		release := g.dur(2*time.Second, 6*time.Second)
		g.add(at, "run functions of "+name+" ignore their context", func(w *World) {
			w.SetWork(name, WorkSpec{IgnoreContext: true})
			w.After(release, "release hung run function of "+name, func(w *World) {
				w.SetWork(name, WorkSpec{})
				w.ReleaseHung(name)
			})
		})
	case 1:
		fail := g.dur(200*time.Millisecond, 2*time.Second)
		g.add(at, "run functions of "+name+" fail", func(w *World) {
			w.SetWork(name, WorkSpec{FailAfter: fail})
			w.After(3*time.Second, "run functions of "+name+" succeed again", func(w *World) { w.SetWork(name, WorkSpec{}) })
		})
	default:
		d := t.StopTimeout + g.dur(0, t.StopTimeout*2)
		g.add(at, fmt.Sprintf("run functions of %s take %v to stop", name, d), func(w *World) {
			w.SetWork(name, WorkSpec{Drain: d})
		})
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// World operations used by schedules.

// SetView makes candidate name see def as the default revision. A name
// that is not running (crashed, not started) is ignored.
func (w *World) SetView(name, def string) {
	if c := w.find(name); c != nil {
		c.setView(def)
	}
}

// SetWork changes how candidate name's run functions behave from their next
// term on.
func (w *World) SetWork(name string, spec WorkSpec) {
	if c := w.find(name); c != nil {
		c.mu.Lock()
		c.work = spec
		c.mu.Unlock()
	}
}

// ReleaseHung lets candidate name's run functions that ignore their
// context return.
func (w *World) ReleaseHung(name string) {
	if c := w.find(name); c != nil {
		c.releaseHung()
	}
}

// Restart starts a new process with the spec of candidate old under the
// identity name, seeing the default revision as the others do.
func (w *World) Restart(old, name string) {
	prev := w.find(old)
	if prev == nil {
		return
	}
	spec := prev.spec
	spec.Name = name
	c := &candidate{w: w, spec: spec, id: name, view: prev.currentView(), work: prev.spec.Work,
		state: w.newState(name)}
	w.cands = append(w.cands, c)
	w.startCandidate(c)
}

// mustFind returns the candidate named name; an unknown name is a bug in
// a scenario.
func (w *World) mustFind(name string) *candidate {
	if c := w.find(name); c != nil {
		return c
	}
	panic(fmt.Sprintf("sim: no candidate %q", name))
}

// find returns the candidate named name, or nil; the latest process of
// that name when a process restarted under its own identity.
func (w *World) find(name string) *candidate {
	for i := len(w.cands) - 1; i >= 0; i-- {
		if c := w.cands[i]; c.id == name {
			return c
		}
	}
	return nil
}

// state returns the fault switches of the actor named name; a name not
// running gets a detached state, so a fault aimed at it does nothing.
func (w *World) state(name string) *actorState {
	if st := w.stateOf(name); st != nil {
		return st
	}
	return newActorState(name, w.clock)
}

// breakWatch closes the watches of actor name and refuses new ones (and
// lists) until the fault ends.
func (w *World) breakWatch(name string) {
	st := w.state(name)
	st.setWatchBroken(true)
	w.api.breakWatches(st)
}

// Recreate deletes the lock object and creates it again without a record,
// with only a label, as `kubectl replace --force` or a GitOps tool does.
func (w *World) Recreate() {
	w.noteFault()
	kind := w.sched.recordResource()
	if err := w.api.deleteLock(kind, w.sched.LockName); err != nil {
		w.j.logf("delete failed: %v", err)
		return
	}
	meta := metav1.ObjectMeta{Name: w.sched.LockName, Namespace: w.sched.Namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "gitops"}}
	var obj runtime.Object = &corev1.ConfigMap{ObjectMeta: meta}
	if kind == leases {
		obj = &coordinationv1.Lease{ObjectMeta: meta}
	}
	if err := w.api.putLock(kind, obj, false); err != nil {
		w.j.logf("re-create failed: %v", err)
	}
}

// ForeignWrite sets an annotation (or a label) on the lock object, as a
// tool that knows nothing of the election would.
func (w *World) ForeignWrite(label bool) {
	value := fmt.Sprintf("step-%d", w.steps)
	if err := w.api.annotate(w.sched.recordResource(), w.sched.LockName, "example.com/touched", value, label); err != nil {
		w.j.logf("foreign write failed: %v", err)
	}
}
