package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/meshd-io/meshd/internal/election/podexit"
	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/internal/pacing"
	"github.com/meshd-io/meshd/internal/protocol/coordination"
	"github.com/meshd-io/meshd/internal/protocol/handover"
	"github.com/meshd-io/meshd/internal/protocol/sessions"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// WorkSpec is how a candidate's run function behaves in a term.
type WorkSpec struct {
	// Drain is how long the work takes to stop once its context ends.
	Drain time.Duration
	// IgnoreContext makes the work run on after its context ends, until the
	// world releases it (ReleaseHung) or the process dies.
	IgnoreContext bool
	// FailAfter, when positive, ends the work with an error (or a panic,
	// with Panic) this long after it started.
	FailAfter time.Duration
	Panic     bool
}

// CandidateSpec describes one meshd candidate.
type CandidateSpec struct {
	Name     string
	Revision string
	Remote   bool
	// View is the default revision this candidate believes in at start.
	View string
	// Watch follows the lock with a watch; otherwise the candidate polls.
	Watch bool
	// Cooperative turns on the handover protocol (lock annotation and
	// handover requests).
	Cooperative bool
	// Session gives the process a session (package election/session) that
	// renews its record while it leads; it needs Watch and a Lease lock.
	Session bool
	Work    WorkSpec
	// StartAt delays the start of the process.
	StartAt time.Duration
	// Pod, if set, is the Pod the process runs in (see pods.go): the
	// process publishes its run next to its record, as WithPodIdentity
	// does.
	Pod string
	// PodFailover makes the process take the lock from a holder whose
	// exit the kubelet reported, as WithPodFailover does.
	PodFailover bool
}

// Key is the holder key the candidate writes: its revision, "^"-prefixed
// when it runs for a remote cluster.
func (s CandidateSpec) Key() string {
	if s.Remote {
		return "^" + s.Revision
	}
	return s.Revision
}

// outranks is the steal rule of the mesh, written here on its own so that
// the harness does not share a bug with the code it checks: a candidate
// (rev, remote) takes from holderKey when its revision differs and is the
// default it believes in, or when the revisions are equal and it is local
// while the holder is remote.
func outranks(rev string, remote bool, holderKey, defaultRev string) bool {
	holderRemote := strings.HasPrefix(holderKey, "^")
	holderRev := strings.TrimPrefix(holderKey, "^")
	if holderRev == "" {
		holderRev = "default"
	}
	if rev == "" {
		rev = "default"
	}
	if rev != holderRev {
		return defaultRev != "" && defaultRev == rev
	}
	return !remote && holderRemote
}

// errWorkFailed is what a failing run function returns.
var errWorkFailed = errors.New("sim: run function failed")

// runFunc is the shape of a run function in the harness.
type runFunc func(ctx context.Context) error

// onStartedLeading adapts a run function to elector.Callbacks, whose
// callback ends the term when it returns. As package election does, it
// recovers a panic and turns it into an error, and reports a failure
// (failed) so that the process backs off before it contends again.
func onStartedLeading(run runFunc, failed func()) func(ctx context.Context) error {
	return func(ctx context.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("sim: run function panicked: %v", r)
			}
			if err != nil {
				failed()
			}
		}()
		return run(ctx)
	}
}

// Back-off after a term that a failed run function ended, as package
// election does with its defaults: from a RetryPeriod (at least a second),
// doubling, at most a minute; afresh once the work ran for a minute.
const (
	simRunBackoff    = time.Second
	simMaxRunBackoff = time.Minute
)

// candidate is one meshd process taking part in the election.
type candidate struct {
	w     *World
	spec  CandidateSpec
	id    string
	state *actorState
	le    *elector.LeaderElector
	// session is the process's session, in session mode.
	session *session.Member
	// starts counts the process's starts (its first and every restart);
	// used by the world's goroutine only.
	starts int
	// podUID is the UID of the Pod the process started in.
	podUID types.UID
	// working is set while the process's run function runs.
	working atomic.Bool

	mu   sync.Mutex
	view string
	work WorkSpec
	// failed is set when a run function failed in the term under way, and
	// workedFrom is when that term's work started.
	failed     bool
	workedFrom time.Time
	// backoffUntil is when the back-off after a failed term ends.
	backoffUntil time.Time
	hung         chan struct{} // closed by ReleaseHung
	killed       chan struct{}
	cancel       context.CancelFunc
	done         chan struct{}
}

func (c *candidate) name() string { return c.id }

func (c *candidate) key() string { return c.spec.Key() }

// fitToLead reports whether the candidate could keep a term it won: its run
// functions do not fail, and it is not backing off after a failed term. A
// candidate unfit to lead outranks nobody for the priority invariant; the
// bound counts from when it becomes fit.
func (c *candidate) fitToLead(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.work.FailAfter == 0 && !now.Before(c.backoffUntil)
}

func (c *candidate) currentView() string { c.mu.Lock(); defer c.mu.Unlock(); return c.view }

func (c *candidate) setView(v string) {
	c.mu.Lock()
	changed := c.view != v
	c.view = v
	c.mu.Unlock()
	if changed && c.le != nil {
		c.w.j.logf("%s sees default %q", c.id, v)
		c.le.Trigger()
	}
}

// shouldSteal is the candidate's KeyComparison.
func (c *candidate) shouldSteal(holderKey string) bool {
	return outranks(c.spec.Revision, c.spec.Remote, holderKey, c.currentView())
}

// shouldHandOver tells this holder whether a candidate with candidateKey is
// entitled to the lock, by this holder's view of the default.
func (c *candidate) shouldHandOver(candidateKey string) bool {
	rev := strings.TrimPrefix(candidateKey, "^")
	return outranks(rev, strings.HasPrefix(candidateKey, "^"), c.key(), c.currentView())
}

// electorConfig is the one place that builds the elector's configuration.
func (c *candidate) electorConfig(lock resourcelock.Interface) elector.Config {
	t := c.w.sched.Timing
	cfg := elector.Config{
		Name:            c.w.sched.LockName,
		Lock:            lock,
		LeaseDuration:   t.LeaseDuration,
		RenewDeadline:   t.RenewDeadline,
		RetryPeriod:     t.RetryPeriod,
		Callbacks:       elector.Callbacks{OnStartedLeading: onStartedLeading(c.run, c.noteFailure)},
		KeyComparison:   c.shouldSteal,
		ReleaseOnCancel: true,
		StopTimeout:     t.StopTimeout,
		Watch:           c.spec.Watch,
		Clock:           newActorClock(c.w.clock, c.state),
		Rand:            c.w.randFor(fmt.Sprintf("%s/%d", c.id, c.starts)),
		Logger:          c.w.electorLogger(c.id),
	}
	cfg.StartAtOnceAfterSteal = c.w.sched.StartAtOnce
	switch {
	case c.w.sched.coordinated():
		// As package election builds a candidate of a coordinated
		// election: it never takes the lock itself while a coordinator
		// decides, and hands it at the end of its term to the best live
		// candidate it knows (the coordinator's roster stands for the
		// LeaseCandidates it would read).
		cfg.KeyComparison = nil
		cfg.Coordination = coordination.New(coordination.Config{Live: c.w.isLive, Successor: c.successor, LeaseDuration: t.LeaseDuration})
	case c.w.sched.PerRevision:
		cfg.KeyComparison = nil // a per-revision election never steals
	}
	if c.spec.Cooperative {
		cfg.Handover = handover.New(handover.Config{
			Name: cfg.Name, Lock: lock.(lockcap.HandoverLock), Grace: t.HandoverGrace, Accept: c.shouldHandOver,
			Outranks: cfg.KeyComparison, LeaseDuration: t.LeaseDuration, RetryPeriod: t.RetryPeriod, Logger: cfg.Logger,
		})
	}
	return cfg
}

// successor is the candidate a holder of a coordinated election hands the
// lock to when its term ends: the best live one other than itself, by its
// own view of the default revision.
func (c *candidate) successor() (identity, key string, ok bool) {
	for _, e := range c.w.liveRoster(c.currentView()) {
		if e.id != c.id {
			return e.id, e.key, true
		}
	}
	return "", "", false
}

// start builds the elector and runs the process: Run again after every
// term, until stopped. In session mode the process's session is the real
// one of package session, writing its Lease through the process's own
// client and following Leases through the process's own watch (the lock's
// hub's watch), so every fault of the process hits it too.
func (c *candidate) start() error {
	c.starts++
	client := newActorClient(c.w.api, c.state)
	lockCfg := resourcelock.Config{Identity: c.id, Key: c.key(), Cooperative: c.spec.Cooperative}
	pods := podexit.NewWatches()
	stopPods := []func(){}
	if c.spec.Pod != "" {
		pub, err := podexit.NewPublisher(client, pods, podexit.Identity{Namespace: c.w.sched.Namespace, Pod: c.spec.Pod,
			UID: string(c.podUID), Container: podContainer, ProcessStart: c.w.clock.Now()}, c.w.electorLogger(c.id+"/pod"))
		if err != nil {
			return fmt.Errorf("pod identity of %s: %w", c.id, err)
		}
		// As package election does: the mark goes out only while the
		// work runs (see its podAware.source).
		lockCfg.HolderPod = func() (lockmeta.HolderPod, bool) {
			if !c.working.Load() {
				return lockmeta.HolderPod{}, false
			}
			return pub.Mark()
		}
		stopPods = append(stopPods, pub.Start(nil))
	}
	lock, err := resourcelock.New(c.w.sched.LockKind, c.w.sched.Namespace, c.w.sched.LockName, client, lockCfg)
	if err != nil {
		return fmt.Errorf("lock of %s: %w", c.id, err)
	}
	cfg := c.electorConfig(lock)
	var judge *podexit.Judge
	if c.spec.PodFailover && c.w.sched.NaiveHolderExit {
		if marks, ok := lock.(lockcap.HolderPodReader); ok {
			cfg.HolderExit = naiveExit{w: c.w, marks: marks}
		}
	} else if c.spec.PodFailover {
		if marks, ok := lock.(lockcap.HolderPodReader); ok {
			judge = podexit.NewJudge(client, pods, marks, c.w.electorLogger(c.id+"/pod"))
			cfg.HolderExit = judge
			stopPods = append(stopPods, judge.Close)
		}
	}
	// What a process shares among its elections is its own, made anew at
	// every start: nothing of one process (or of one World) reaches
	// another. The session follows Leases through the elector's hub.
	cfg.Hub, cfg.Pacer = lockwatch.NewWatchHub(), pacing.NewPacer()
	var member *session.Member
	if c.spec.Session {
		t := c.w.sched.Timing
		member, err = session.NewMember(session.Config{
			Client: client, Namespace: c.w.sched.Namespace, Identity: c.id,
			LeaseDuration: t.LeaseDuration, RenewDeadline: t.RenewDeadline, RetryPeriod: t.RetryPeriod,
			Clock: newActorClock(c.w.clock, c.state), Logger: c.w.electorLogger(c.id + "/session"),
			Sessions: session.NewSessions(cfg.Hub),
		})
		if err != nil {
			return fmt.Errorf("session of %s: %w", c.id, err)
		}
		cfg.Session = sessions.New(sessions.Config{
			Name: cfg.Name, Heartbeat: member, Lock: lock.(sessions.Lock), RetryPeriod: t.RetryPeriod, Logger: cfg.Logger,
		})
	}
	le, err := elector.New(cfg)
	if err != nil {
		for _, stop := range stopPods {
			stop()
		}
		return fmt.Errorf("elector of %s: %w", c.id, err)
	}
	if judge != nil {
		judge.SetWake(le.Trigger)
	}
	stopSession := func() {
		for _, stop := range stopPods {
			stop()
		}
	}
	if member != nil {
		stopMember := member.Start()
		stopPodsToo := stopSession
		stopSession = func() { stopMember(); stopPodsToo() }
		// The session's first heartbeat goes out before the elector starts,
		// not in a race with it: package election waits for it too.
		c.w.settle()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	c.le, c.cancel, c.done, c.session = le, cancel, make(chan struct{}), member
	c.killed, c.hung = make(chan struct{}), make(chan struct{})
	c.mu.Unlock()
	c.w.j.logf("%s starts (key %q, watch %v, cooperative %v, session %v, default %q)", c.id, c.key(), c.spec.Watch, c.spec.Cooperative, c.spec.Session, c.currentView())
	go c.loop(ctx, stopSession)
	return nil
}

// loop runs the elector until ctx ends, then leaves the session, as
// package election does once the elector has stopped: gracefully (the
// session's end clears its holder) after a shutdown, and in vain after a
// crash, whose API calls fail.
func (c *candidate) loop(ctx context.Context, stopSession func()) {
	defer close(c.done)
	defer stopSession()
	inARow := 0 // terms in a row that a failure ended
	for ctx.Err() == nil {
		began := c.w.clock.Now()
		c.le.Run(ctx)
		c.mu.Lock()
		failed, workedFrom := c.failed, c.workedFrom
		c.failed = false
		c.mu.Unlock()
		if failed && ctx.Err() == nil {
			if c.w.clock.Since(workedFrom) >= simMaxRunBackoff {
				inARow = 0
			}
			inARow++
			wait := max(simRunBackoff, c.w.sched.Timing.RetryPeriod)
			for i := 1; i < inARow && wait < simMaxRunBackoff; i++ {
				wait *= 2
			}
			wait = min(wait, simMaxRunBackoff)
			c.mu.Lock()
			c.backoffUntil = c.w.clock.Now().Add(wait)
			c.mu.Unlock()
			select {
			case <-c.w.clock.After(wait):
			case <-ctx.Done():
			}
			continue
		}
		if ctx.Err() == nil && !c.w.clock.Now().After(began) {
			// Run came back without simulated time passing: wait, so that a
			// Run that returns at once cannot spin the step forever.
			select {
			case <-c.w.clock.After(c.w.sched.Timing.RetryPeriod):
			case <-ctx.Done():
			}
		}
	}
}

// run is the candidate's run function: it records its work in the ledger
// for exactly as long as it runs.
func (c *candidate) run(ctx context.Context) error {
	c.mu.Lock()
	spec, hung, killed := c.work, c.hung, c.killed
	c.mu.Unlock()
	ticket := c.w.ledger.start(c.id)
	defer c.w.ledger.end(ticket)
	c.working.Store(true)
	defer c.working.Store(false)
	c.mu.Lock()
	c.workedFrom = c.w.clock.Now()
	c.mu.Unlock()
	var fail <-chan time.Time
	if spec.FailAfter > 0 {
		fail = c.w.clock.After(spec.FailAfter)
	}
	select {
	case <-ctx.Done():
	case <-killed:
		return nil
	case <-fail:
		c.w.j.logf("%s run function fails (panic %v)", c.id, spec.Panic)
		c.w.noteFault()
		c.w.trans.joined()
		if spec.Panic {
			panic(fmt.Sprintf("sim: run function of %s panics", c.id))
		}
		return errWorkFailed
	}
	c.w.ledger.cancelled(ticket)
	if spec.IgnoreContext {
		c.w.j.logf("%s run function ignores its context", c.id)
		c.w.hangBegins()
		defer c.w.hangEnds()
		select {
		case <-hung:
		case <-killed:
			return nil
		}
	}
	if spec.Drain > 0 {
		select {
		case <-c.w.clock.After(spec.Drain):
		case <-killed:
		}
	}
	return nil
}

// leading reports whether the candidate believes it leads.
func (c *candidate) leading() bool {
	c.mu.Lock()
	le, killed := c.le, c.killed
	c.mu.Unlock()
	if le == nil {
		return false
	}
	select {
	case <-killed:
		return false
	default:
	}
	return le.IsLeader()
}

// alive reports whether the process runs (started, not crashed or stopped).
func (c *candidate) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.le == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	case <-c.killed:
		return false
	default:
	}
	return c.cancel != nil
}

// stop cancels the process's context: a graceful shutdown.
func (c *candidate) stop() {
	c.mu.Lock()
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		c.w.j.logf("%s shuts down", c.id)
		if c.spec.Pod != "" {
			// First look before cancel: the world has settled, so what it
			// sees does not depend on how far the process's goroutines got
			// with the shutdown meanwhile, as it did when it looked after.
			c.w.podEndOnceStopped(c, 0)
		}
		cancel()
	}
}

// crash ends the process at once: its work stops, its API calls fail, and
// nothing is released.
func (c *candidate) crash() {
	c.mu.Lock()
	killed, cancel := c.killed, c.cancel
	c.mu.Unlock()
	if killed == nil {
		return
	}
	c.w.j.logf("%s crashes", c.id)
	c.w.podEnded(c)
	c.state.kill()
	select {
	case <-killed:
	default:
		close(killed)
	}
	c.w.ledger.endActor(c.id)
	cancel()
}

// releaseHung lets a run function that ignores its context return.
func (c *candidate) releaseHung() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hung != nil {
		select {
		case <-c.hung:
		default:
			close(c.hung)
		}
	}
}

func (c *candidate) stopped() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// noteFailure records that a run function failed in the term under way.
func (c *candidate) noteFailure() {
	c.mu.Lock()
	c.failed = true
	c.mu.Unlock()
}
