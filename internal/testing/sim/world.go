package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Timing is the election timing every candidate of a schedule uses.
type Timing struct {
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	StopTimeout   time.Duration
	HandoverGrace time.Duration
}

// Action is something the world does at a point of simulated time.
type Action struct {
	At   time.Duration
	Name string
	Do   func(w *World)
}

// Schedule is one run of the simulation: who takes part, with which
// timing, over which lock, and what happens when.
type Schedule struct {
	Name      string
	Seed      int64
	Namespace string
	LockName  string
	LockKind  string // resourcelock.ConfigMapsResourceLock, LeasesResourceLock or ConfigMapsLeasesResourceLock
	// Mode is how the candidates agree on a leader (ModeRacing when empty;
	// in ModeCoordinated and ModeOldest the world plays the coordinator).
	Mode string
	// PerRevision: the candidates are of one revision and never take the
	// lock from its holder (no KeyComparison).
	PerRevision bool
	// StartAtOnce sets elector.Config.StartAtOnceAfterSteal for every
	// candidate.
	StartAtOnce bool
	// Truth is the default revision the webhook names when the schedule
	// begins (what a coordinator reads); SetTruth changes it.
	Truth string
	// NaiveHolderExit replaces the Pod-aware failover of every candidate
	// with PodFailover by a naive one that takes any sign of trouble for an
	// exit (see naiveExit), to show that a named scenario fails without the
	// proof rules of package podexit. Never set by the generators.
	NaiveHolderExit bool
	// KubeletDelay is how long the kubelet takes to report what the
	// process in a Pod does (see pods.go).
	KubeletDelay time.Duration
	// Combinations are the accepted combinations the candidates run, one
	// per candidate, as the generator drew them.
	Combinations []Combination
	Timing       Timing
	Duration     time.Duration
	Candidates   []CandidateSpec
	Istiods      []IstiodSpec
	Actions      []Action
	// Setup runs before any actor starts, for example to write a lock
	// object left behind by earlier processes.
	Setup func(w *World) error
	// Checks run when the schedule ends, before the actors stop; they
	// report scenario-specific violations with World.Violate.
	Checks []func(w *World)
	// TransitionSlack is the constant of the transition bound.
	TransitionSlack int
	// OnRecord, if set, sees every write of the lock object as it is
	// stored (under the API's lock: it must not call the API).
	OnRecord func(w *World, r Record)
	// InvalidConfigOK accepts a candidate configuration that the elector
	// rejects as invalid: the schedule then ends there, without violation.
	// For scenarios whose timing a stricter validation may refuse.
	InvalidConfigOK bool
	// CheckPriority turns on the priority invariant (see the package doc).
	CheckPriority bool
}

// Result is what a run found.
type Result struct {
	Violations []Violation
	Trace      string
	Steps      int
	WorkStarts int
	// Rejected is the configuration error that ended a schedule with
	// InvalidConfigOK.
	Rejected error
}

// Record is one write of the lock object, as the API stored it.
type Record struct {
	At       time.Duration
	Holder   string
	Key      string
	Handover lockmeta.Handover
	Deleted  bool
	// Writer is the actor that wrote it; empty for the world's own writes.
	Writer string
}

// World runs one schedule. Its methods are for actions and checks.
type World struct {
	sched  Schedule
	rnd    *rand.Rand
	clock  *simClock
	api    *apiServer
	j      *journal
	ledger *ledger
	trans  *transitions

	cands   []*candidate
	istiods []*istiod
	// coord plays the coordinator of a coordinated election, and truth is
	// the default revision the webhook names, which it reads.
	coord coordinator
	truth string
	// pods is the kubelet's state of the candidates' Pods, by name.
	pods    map[string]*simPod
	podSeq  int // Pods made for processes whose predecessor still ran
	pending []Action
	// triggers are actions that wait for a write of the lock (When).
	triggers []*trigger
	// left is when candidates left by LeaveWhen.
	left map[string]time.Duration

	mu           sync.Mutex
	rejected     error // a configuration the elector refused (InvalidConfigOK)
	records      []Record
	faults       int       // faults under way
	hangs        int       // run functions ignoring their context
	lastFaultEnd time.Time // when the latest fault ended
	loose        bool      // liveness bound for polling (see livenessBound)
	lastLeader   time.Time
	// outrankedSince is when the holder of the record was last seen
	// outranked by a live candidate while every live candidate agreed on
	// the default and no fault was under way; zero when it is not.
	outrankedSince time.Time
	steps          int
}

// epoch is where every schedule's clock starts.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// maxStepDivisor: the clock never moves by more than RetryPeriod/maxStepDivisor
// at once, so that timers of the reflector and request timeouts, which run on
// the bubble's clock, fire close to when they are due.
const maxStepDivisor = 4

func newWorld(s Schedule) *World {
	clk := newSimClock(epoch)
	j := newJournal(clk)
	w := &World{
		sched: s, rnd: rand.New(rand.NewSource(s.Seed)), clock: clk,
		api: newAPIServer(clk, s.Namespace), j: j, ledger: newLedger(j),
		trans:        &transitions{j: j, retry: s.Timing.RetryPeriod, slack: s.TransitionSlack},
		lastFaultEnd: epoch, lastLeader: epoch, truth: s.Truth,
	}
	w.api.gate = newCallGate(s.Seed)
	clk.settle = w.settle
	w.api.onChange = w.noteChange
	w.ledger.excuse = w.excuse
	for _, spec := range s.Candidates {
		w.cands = append(w.cands, &candidate{w: w, spec: spec, id: spec.Name, view: spec.View, work: spec.Work,
			state: w.newState(spec.Name)})
		if !spec.Watch {
			w.loose = true
		}
	}
	for _, spec := range s.Istiods {
		w.istiods = append(w.istiods, &istiod{w: w, spec: spec, state: w.newState(spec.Name),
			rnd: rand.New(rand.NewSource(s.Seed ^ int64(len(w.istiods)+1)))})
		w.loose = true
	}
	return w
}

// randFor returns the random source of the actor or process named name:
// each draw is a function of the seed, the name and the simulated instant
// of the draw, and of nothing else. What one actor draws therefore does not
// depend on when the others draw, and neither does it depend on how many
// draws the same actor made before: an elector draws its jitter every time
// its loop wakes, and how many wake-ups the Go scheduler coalesces (two
// deliveries before the loop runs, or one after the other) is not decided
// by the seed. Draws at the same instant return the same value, so the
// last timer armed in a step is the same whichever way the wake-ups fell.
func (w *World) randFor(name string) *rand.Rand {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%d/%s", w.sched.Seed, name)
	return rand.New(&instantSource{key: h.Sum64(), clock: w.clock})
}

// instantSource is a rand.Source whose value depends only on its key and
// the simulated time (see randFor).
type instantSource struct {
	key   uint64
	clock *simClock
}

// Int63 implements rand.Source. Values just below 1<<63 are folded down:
// rand.Rand's Float64 draws again on a value that rounds to 1, and Int63n
// on one above its limit, which a source that repeats itself within an
// instant would never leave.
func (s *instantSource) Int63() int64 {
	x := s.key ^ uint64(s.clock.Now().UnixNano())*0x9e3779b97f4a7c15
	// splitmix64's finaliser spreads neighbouring instants apart.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	v := int64(x >> 1)
	if v > 1<<63-1-1<<32 {
		v -= 1 << 32
	}
	return v
}

// Seed implements rand.Source; the key is fixed when the source is made.
func (s *instantSource) Seed(int64) {}

// newState returns the fault switches of a new actor; its one-off faults
// count as faults when they hit.
func (w *World) newState(name string) *actorState {
	st := newActorState(name, w.clock)
	st.injected = w.noteFault
	st.onWriteFault = func(kind string, lost bool) {
		w.j.logf("fault hits: the %s write of %s fails (lost reply %v)", kind, name, lost)
	}
	return st
}

// noteChange follows every write of the lock object (called by the API
// under its lock, in the order of the writes).
func (w *World) noteChange(ev apiEvent) {
	if ev.resource != w.sched.recordResource() {
		return
	}
	if m, err := meta.Accessor(ev.obj); err != nil || m.GetName() != w.sched.LockName {
		if err == nil && isSessionLease(ev.resource, m.GetName()) {
			w.noteSession(ev)
		}
		return
	}
	r := Record{At: w.j.since(), Deleted: ev.typ == watch.Deleted, Writer: ev.writer}
	var ann map[string]string
	switch o := ev.obj.(type) {
	case *corev1.ConfigMap:
		ann = o.Annotations
		if raw, ok := o.Annotations[resourcelock.LeaderAnnotationKey]; ok {
			if rec, err := resourcelock.DecodeRecord([]byte(raw)); err == nil {
				r.Holder, r.Key = rec.HolderIdentity, rec.HolderKey
			}
		}
	case *coordinationv1.Lease:
		ann = o.Annotations
		rec := resourcelock.LeaseToRecord(o)
		r.Holder, r.Key = rec.HolderIdentity, rec.HolderKey
	}
	if raw, ok := ann[lockmeta.HandoverAnnotationKey]; ok {
		r.Handover = decodeHandover(raw)
	}
	w.mu.Lock()
	w.records = append(w.records, r)
	w.mu.Unlock()
	w.j.logf("lock %s: holder %q key %q handover %+v%s", ev.typ, r.Holder, r.Key, r.Handover, markOf(ann))
	// A release (an actor writes no holder) ends a term: the next holder,
	// even the same one, counts as a change. An object the world re-creates
	// without a record ends no term: its holder writing its record again is
	// no change.
	if !r.Deleted && (r.Holder != "" || r.Writer != "") {
		w.trans.observe(r.Holder)
	}
	if w.sched.OnRecord != nil {
		w.sched.OnRecord(w, r)
	}
}

// markOf describes the session mark of a lock object for the trace: its
// holder and whether it names a session (not which: the token is random).
func markOf(ann map[string]string) string {
	raw, ok := ann[lockmeta.SessionAnnotationKey]
	if !ok {
		return ""
	}
	var m lockmeta.SessionMark
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return fmt.Sprintf(" session mark %q (undecodable)", raw)
	}
	name, _, _ := strings.Cut(m.Session, "/")
	return fmt.Sprintf(" session mark {holder %q session %q}", m.Holder, name)
}

// noteSession traces the writes of session Leases: their creation, their
// graceful end (no holder) and their deletion, and every heartbeat when
// the electors are traced too. The token is left out: it is drawn from
// crypto/rand, and the trace of a seed must not depend on it.
func (w *World) noteSession(ev apiEvent) {
	l, ok := ev.obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if ev.typ == watch.Modified && holder != "" && !TraceElectors {
		return
	}
	w.j.logf("session lease %s: %s by %q, holder %q", l.Name, ev.typ, ev.writer, holder)
}

// run executes the schedule; it must be called inside a synctest bubble.
func (w *World) run() Result {
	if err := w.setup(); err != nil {
		w.j.violate("setup", "%v", err)
		_, trace := w.j.result()
		return Result{Violations: []Violation{{Invariant: "setup", Detail: err.Error()}}, Trace: trace}
	}
	end := epoch.Add(w.sched.Duration)
	for {
		w.settle()
		w.fireTriggers()
		w.runDue()
		w.coordinate()
		w.fireTriggers()
		w.api.deliver(w.settle)
		w.fireTriggers()
		w.check()
		now := w.clock.Now()
		if !now.Before(end) || w.Rejected() != nil {
			break
		}
		w.advance(w.nextStop(end).Sub(now))
	}
	if w.Rejected() == nil {
		for _, check := range w.sched.Checks {
			check(w)
		}
	}
	w.teardown()
	v, trace := w.j.result()
	return Result{Violations: v, Trace: trace, Steps: w.steps, WorkStarts: w.ledger.starts, Rejected: w.Rejected()}
}

func (w *World) setup() error {
	for i, c := range w.sched.Combinations {
		w.j.logf("%s runs %v", w.sched.Candidates[i].Name, c)
	}
	if w.sched.Setup != nil {
		if err := w.sched.Setup(w); err != nil {
			return err
		}
	}
	for _, c := range w.cands {
		c := c
		w.pending = append(w.pending, Action{At: c.spec.StartAt, Name: "start " + c.id, Do: func(w *World) {
			w.startCandidate(c)
		}})
	}
	for _, s := range w.istiods {
		s := s
		w.pending = append(w.pending, Action{At: s.spec.StartAt, Name: "start " + s.spec.Name, Do: func(w *World) {
			w.trans.joined()
			if err := s.start(); err != nil {
				w.j.violate("setup", "%v", err)
			}
			w.noteFault()
		}})
	}
	w.pending = append(w.pending, w.sched.Actions...)
	sort.SliceStable(w.pending, func(i, k int) bool { return w.pending[i].At < w.pending[k].At })
	return nil
}

// startCandidate starts c; a configuration the elector rejects is a
// violation unless the schedule accepts it, and then ends the schedule.
func (w *World) startCandidate(c *candidate) {
	w.noteFault()
	w.trans.joined()
	if c.spec.Pod != "" {
		c.podUID = w.podStarted(c)
	}
	err := c.start()
	switch {
	case err == nil:
	case errors.Is(err, elector.ErrInvalidConfig) && w.sched.InvalidConfigOK:
		w.j.logf("configuration rejected, as this schedule allows: %v", err)
		w.mu.Lock()
		w.rejected = err
		w.mu.Unlock()
	default:
		w.j.violate("setup", "%v", err)
	}
}

// recordResource is the resource of the object whose record the world
// follows and the faults hit: the lock's, or a MultiLock's first
// (ConfigMap), whose record decides.
func (s Schedule) recordResource() string {
	switch s.LockKind {
	case resourcelock.ConfigMapsLeasesResourceLock:
		return configMaps
	case resourcelock.LeasesConfigMapsResourceLock:
		return leases
	}
	return s.LockKind
}

// SetTruth makes the webhook name def the default revision (what a
// coordinator reads; candidates see it by SetView).
func (w *World) SetTruth(def string) { w.truth = def }

// Rejected is the configuration error that ended the schedule, if any.
func (w *World) Rejected() error { w.mu.Lock(); defer w.mu.Unlock(); return w.rejected }

// settle waits until every goroutine of the simulation is blocked: on the
// fake clock, on a watch, on a paused API call, or on a harness channel.
// Requests waiting at the API's gate are let through one at a time, each
// followed by another wait, so that requests made in one step reach the API
// in an order drawn from the seed.
func (w *World) settle() {
	synctest.Wait()
	for w.api.gate.releaseOne() {
		synctest.Wait()
	}
}

// advance moves both clocks, the fake clock of the actors and the bubble's
// own clock that timeouts of contexts and client-go's reflector use.
func (w *World) advance(d time.Duration) {
	w.steps++
	if d <= 0 {
		return
	}
	// The bubble's clock goes first: a context timeout or a reflector's
	// back-off then fires no later, by the fake clock, than it is due.
	time.Sleep(d)
	w.settle()
	w.clock.Step(d)
}

// nextStop is the next point of interest: a timer, a watch event that
// becomes due, an action, the end, or the maximum step.
func (w *World) nextStop(end time.Time) time.Time {
	now := w.clock.Now()
	next := now.Add(w.sched.Timing.RetryPeriod / maxStepDivisor)
	consider := func(t time.Time, ok bool) {
		if ok && t.After(now) && t.Before(next) {
			next = t
		}
	}
	consider(w.clock.next())
	consider(w.api.nextDelivery())
	if len(w.pending) > 0 {
		consider(epoch.Add(w.pending[0].At), true)
	}
	consider(end, true)
	return next
}

// runDue runs the actions that are due, in order, settling after each.
func (w *World) runDue() {
	for len(w.pending) > 0 && !epoch.Add(w.pending[0].At).After(w.clock.Now()) {
		a := w.pending[0]
		w.pending = w.pending[1:]
		w.j.logf("action: %s", a.Name)
		a.Do(w)
		w.settle()
	}
}

// After schedules an action d from now.
func (w *World) After(d time.Duration, name string, do func(w *World)) {
	a := Action{At: w.j.since() + d, Name: name, Do: do}
	i := sort.Search(len(w.pending), func(i int) bool { return w.pending[i].At > a.At })
	w.pending = append(w.pending, Action{})
	copy(w.pending[i+1:], w.pending[i:])
	w.pending[i] = a
}

// Fault begins a fault now and ends it after d.
func (w *World) Fault(name string, d time.Duration, begin, end func(w *World)) {
	w.mu.Lock()
	w.faults++
	w.mu.Unlock()
	w.j.logf("fault begins: %s for %v", name, d)
	begin(w)
	w.After(d, "end of "+name, func(w *World) {
		end(w)
		w.mu.Lock()
		w.faults--
		w.lastFaultEnd = w.clock.Now()
		w.mu.Unlock()
	})
}

// noteFault records an instant fault (a crash, a start, a deletion).
func (w *World) noteFault() {
	w.mu.Lock()
	w.lastFaultEnd = w.clock.Now()
	w.mu.Unlock()
}

func (w *World) hangBegins() {
	w.mu.Lock()
	w.hangs++
	w.mu.Unlock()
}

func (w *World) hangEnds() {
	w.mu.Lock()
	w.hangs--
	w.lastFaultEnd = w.clock.Now()
	w.mu.Unlock()
}

// Loosen switches the liveness bound to the one for polling candidates.
func (w *World) Loosen() { w.mu.Lock(); w.loose = true; w.mu.Unlock() }

// teardown stops every actor and steps the clock until all have stopped.
func (w *World) teardown() {
	w.j.logf("teardown")
	// One actor at a time, settling after each: a stopped actor's work ends
	// on goroutines of its own, and would otherwise race the next stop.
	for _, c := range w.cands {
		c.releaseHung()
		c.stop()
		w.settle()
	}
	for _, s := range w.istiods {
		s.stop()
		w.settle()
	}
	if w.drain(w.sched.Timing.StopTimeout + w.sched.Timing.LeaseDuration + 10*time.Second) {
		return
	}
	for _, c := range w.cands {
		if c.le != nil {
			select {
			case <-c.stopped():
			default:
				w.j.violate("stuck", "%s did not return from Run within %v of its shutdown", c.id,
					w.sched.Timing.StopTimeout+w.sched.Timing.LeaseDuration+10*time.Second)
			}
		}
		c.crash()
	}
	for _, s := range w.istiods {
		s.crash()
	}
	if !w.drain(time.Minute) {
		panic(errors.New("sim: actors did not stop after a crash"))
	}
}

// drain steps the clock until every actor's loop has returned or d passed.
func (w *World) drain(d time.Duration) bool {
	deadline := w.clock.Now().Add(d)
	for {
		w.settle()
		w.api.deliver(w.settle)
		if w.allStopped() {
			return true
		}
		if !w.clock.Now().Before(deadline) {
			return false
		}
		w.advance(w.nextStop(deadline).Sub(w.clock.Now()))
	}
}

func (w *World) allStopped() bool {
	for _, c := range w.cands {
		if ch := c.stopped(); ch != nil {
			select {
			case <-ch:
			default:
				return false
			}
		}
	}
	for _, s := range w.istiods {
		if ch := s.stopped(); ch != nil {
			select {
			case <-ch:
			default:
				return false
			}
		}
	}
	return true
}

// Violate records a scenario-specific violation.
func (w *World) Violate(invariant, format string, args ...any) {
	w.j.violate(invariant, format, args...)
}

// Records returns every write of the lock object so far.
func (w *World) Records() []Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Record(nil), w.records...)
}

// Work returns every term's work so far.
func (w *World) Work() []Interval { return w.ledger.intervals() }

// Now is the simulated time since the schedule started.
func (w *World) Now() time.Duration { return w.j.since() }
