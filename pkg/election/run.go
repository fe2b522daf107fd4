package election

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"go.uber.org/zap"

	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// RunFunc is work gated by an election. It starts when a term begins, with
// a context that carries the term (see TermFrom) and is cancelled when the
// term ends; it should return soon after.
//
// An error or a panic ends the term for all of the election's run functions:
// the others are cancelled and awaited, the error is recorded
// (Status.LastRunError and the meshd_election_run_failures_total metric),
// the lock is released or handed over, and the candidate contends again
// after a back-off (1s, doubling up to 1m for failures in a row, never
// shorter than the retry period). Returning nil ends only this function:
// the term goes on, and this instance keeps the lock until the term ends even
// when every run function has returned, as istiod's elections do.
type RunFunc func(ctx context.Context) error

// ErrStarted is returned by a second call of RunContext (or Group.Run).
var ErrStarted = errors.New("election: Run called more than once")

// panicError is the error recorded for a run function that panicked.
type panicError struct {
	// value is what the function panicked with.
	value any
	// stack is the goroutine's stack where it panicked.
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("run function panicked: %v", e.value) }

// Add registers work that runs while this instance leads. It must be called
// before Run; a later call is logged and ignored. It returns l for chaining.
func (l *LeaderElection) Add(f RunFunc) *LeaderElection {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		l.log.Error("a run function was added after Run; it is ignored")
		return l
	}
	l.runFns = append(l.runFns, f)
	return l
}

// AddRunFunction registers work in the form istiod's leaderelection package
// uses: stop is closed when the term ends. The function cannot fail; if it
// returns while leading (for example after starting goroutines that watch
// stop), the term goes on. It returns l for chaining.
func (l *LeaderElection) AddRunFunction(f func(stop <-chan struct{})) *LeaderElection {
	return l.Add(func(ctx context.Context) error {
		f(ctx.Done())
		return nil
	})
}

// Run is RunContext with a stop channel, as in istiod's leaderelection
// package.
func (l *LeaderElection) Run(stop <-chan struct{}) {
	ctx, cancel := contextUntil(stop)
	defer cancel()
	l.logRunError(l.RunContext(ctx)) // a small frame: Run is on the stack of a waiting candidate
}

// contextUntil returns a context that is cancelled when stop is closed or
// cancel is called.
func contextUntil(stop <-chan struct{}) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// logRunError logs what RunContext returned, if it failed.
func (l *LeaderElection) logRunError(err error) {
	if err != nil {
		l.log.Error("Run failed", zap.Error(err))
	}
}

// RunContext contends for leadership until ctx is cancelled, contending
// again after every term. While leading, every run function runs; when the
// term ends they are cancelled and awaited (up to the stop timeout) before
// the lock is released. It returns only after everything it started has
// returned; it returns ErrStarted when called a second time.
func (l *LeaderElection) RunContext(ctx context.Context) error {
	ctx, stop, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer stop()
	inARow := 0 // terms ended by a failure, one after the other
	for ctx.Err() == nil {
		// One contention: from the first attempt to the end of the term it
		// may win. Written out here rather than in a function of its own:
		// this loop is on the stack of a waiting candidate (see below).
		t := l.beginContention()
		if l.enabled {
			l.elector.Run(ctx)
		} else {
			_ = l.runLeading(ctx)
		}
		if !l.endContention(ctx, t, &inARow) {
			break
		}
	}
	return nil
}

// begin starts what RunContext runs besides contending: the owned
// watchers, the event recorder, the session and the candidacy. It returns
// the context to contend with and the function that stops all of it, or
// ErrStarted.
//
// RunContext, the loop of contentions and the elector's wait are on the
// stack of every waiting candidate, thousands of them in a large process.
// The runtime halves a goroutine's stack only while less than a quarter
// of it is in use, so these frames are kept small, and what runs once per
// RunContext or per contention is in functions that have returned by the
// time the candidate waits (package elector's doc: The stack of a waiting
// candidate).
func (l *LeaderElection) begin(ctx context.Context) (context.Context, func(), error) {
	l.mu.Lock()
	started := l.started
	l.started = true
	l.mu.Unlock()
	if started {
		return ctx, nil, ErrStarted
	}
	l.running.Store(true)
	if !l.enabled {
		l.log.Info("leader election disabled; run functions start at once")
	}
	stopOwned := l.startOwned()
	ctx, withdrawn := l.runCandidacy(ctx)
	if l.session != nil && l.enabled {
		// Bounded: without a working session the election renews its
		// record itself.
		l.session.AwaitStart(ctx, l.sessionWait)
	}
	return ctx, func() {
		withdrawn()
		stopOwned()
		l.running.Store(false)
	}, nil
}

// startOwned starts what a standalone election runs besides its elector:
// its view of its Shared's default-revision watcher and the event
// recorder. The function it returns stops them and waits for them.
func (l *LeaderElection) startOwned() func() {
	stopEvents := l.events.start()
	stopWatcher := func() {}
	switch {
	case l.ownedWatcher && l.coordinatorWatcher != nil:
		stopWatcher = startWatcher(l.coordinatorWatcher)
	case l.ownedWatcher:
		stopWatcher = startWatcher(l.watcher)
	}
	stopSession := func() {}
	if l.session != nil && l.enabled {
		stopSession = l.session.Start()
	}
	stopPod := l.pod.start()
	return func() {
		stopPod()
		stopSession() // the elector has stopped: no work of this election runs
		stopWatcher()
		stopEvents()
	}
}

// runCandidacy publishes the LeaseCandidate of a coordinated election for
// as long as ctx lives. It returns the context the election runs with,
// which ends only once ctx has ended and the candidate has been withdrawn:
// when the lock is then handed over, neither the coordinator nor the
// holder's successor choice counts this instance any more. The function
// it returns waits for the withdrawal.
func (l *LeaderElection) runCandidacy(ctx context.Context) (context.Context, func()) {
	if l.candidacy == nil || !l.enabled {
		return ctx, func() {}
	}
	withdraw, stop := l.candidacy.start(l.clock, l.elector.Trigger)
	inner, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		withdraw()
		cancel()
	}()
	return inner, func() {
		<-done
		stop()
	}
}

// startWatcher runs w until the returned function is called; that function
// returns once w has stopped. A watcher that can start by itself
// (defaultwatch.Starter, as the shared watchers are) costs no goroutine here.
func startWatcher(w revisions.DefaultWatcher) (stop func()) {
	if s, ok := w.(defaultwatch.Starter); ok {
		return s.Start()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(done) })
	return func() {
		close(done)
		wg.Wait()
	}
}

// termRun is one contention: from the start of Run's attempt to the end of
// the term it may win. Its fields are guarded by the election's mu.
type termRun struct {
	started time.Time // when the work started
	failed  bool      // a run function failed and ended the term
}

// beginContention counts a contention and makes it the current one.
func (l *LeaderElection) beginContention() *termRun {
	l.cycle.Add(1)
	t := &termRun{}
	l.mu.Lock()
	l.term = t
	l.mu.Unlock()
	return t
}

// endContention ends the contention t. After a term that a failed run
// function ended, it backs off: inARow counts such terms one after the
// other, and the back-off grows with it. It reports false when ctx ended
// during the back-off.
func (l *LeaderElection) endContention(ctx context.Context, t *termRun, inARow *int) bool {
	l.mu.Lock()
	l.term = nil
	started, failed := t.started, t.failed
	l.mu.Unlock()
	if !failed {
		*inARow = 0
		return true
	}
	if l.clock.Since(started) >= l.backoff.max {
		*inARow = 0 // the work ran well for a while: start the back-off afresh
	}
	*inARow++
	return l.sleep(ctx, l.backoff.after(*inARow))
}

// runLeading runs the term's work until ctx ends or a run function fails,
// and waits for every run function. A failure ends the term (the elector
// then releases the lock or hands it over); otherwise it returns only once
// the term is over, even if every run function returned earlier.
func (l *LeaderElection) runLeading(ctx context.Context) error {
	term, ok := l.currentTerm()
	if !ok {
		return nil // another holder took the lock before the work could start
	}
	l.mu.Lock()
	fns := append([]RunFunc(nil), l.runFns...)
	t := l.term
	t.started = l.clock.Now()
	l.mu.Unlock()

	l.setLeading(true)
	err := l.runWork(WithTerm(ctx, term), fns)
	if err == nil {
		<-ctx.Done() // every run function returned: keep the term until it ends
	}
	l.setLeading(false)
	if err != nil {
		l.recordFailure(err)
		l.mu.Lock()
		t.failed = true
		l.mu.Unlock()
	}
	// The elector ends the term when this returns: it counts the failure,
	// keeps renewing until the work has stopped, then releases or hands over.
	return err
}

// currentTerm is the term just won, as the lock record says.
func (l *LeaderElection) currentTerm() (Term, bool) {
	t := Term{Lock: l.spec.Namespace + "/" + l.lockName, Identity: l.holderIdentity, Elected: l.enabled}
	if !l.enabled {
		t.AcquireTime = l.clock.Now()
		return t, true
	}
	rec, _ := l.elector.Observed()
	if rec.HolderIdentity != l.holderIdentity {
		return Term{}, false
	}
	t.Transitions = rec.LeaderTransitions
	t.AcquireTime = rec.AcquireTime.Time
	return t, true
}

// runWork runs fns until all have returned; the first of them to fail while
// ctx is live cancels the others, and its error is returned.
func (l *LeaderElection) runWork(ctx context.Context, fns []RunFunc) error {
	if len(fns) == 1 {
		// One function runs on the term's goroutine: a goroutine less per
		// leader (a process leading a thousand elections keeps a thousand
		// stacks fewer). An error after the term ended is late, as below.
		err := call(ctx, fns[0])
		if err != nil && ctx.Err() != nil {
			l.lateError(err)
			return nil
		}
		return err
	}
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for _, f := range fns {
		wg.Go(func() {
			ferr := call(workCtx, f)
			if ferr == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if first == nil && workCtx.Err() == nil {
				first = ferr
				cancel()
				return
			}
			l.lateError(ferr)
		})
	}
	wg.Wait()
	return first
}

// call runs f, turning a panic into a *panicError.
func call(ctx context.Context, f RunFunc) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return f(ctx)
}

// lateError handles an error returned after the term (or its work) had
// already been ended: a panic is still recorded, a cancellation is expected.
func (l *LeaderElection) lateError(err error) {
	var p *panicError
	switch {
	case errors.As(err, &p):
		l.recordFailure(err)
	case errors.Is(err, context.Canceled):
	default:
		l.log.Warn("run function failed while stopping", zap.Error(err))
	}
}

// recordFailure reports a failed run function once: in the log, in
// Status, as a metric and as a Kubernetes Event on the lock object.
func (l *LeaderElection) recordFailure(err error) {
	l.mu.Lock()
	l.lastErr = err
	l.failures++
	l.mu.Unlock()
	fields := []zap.Field{zap.Error(err)}
	var p *panicError
	if errors.As(err, &p) {
		fields = append(fields, zap.ByteString("stack", p.stack))
	}
	l.log.Error("run function failed; ending the term", fields...)
	if l.metrics != nil {
		l.metrics.RunFailed(l.lockName)
	}
	if l.lock != nil {
		l.lock.RecordEvent(corev1.EventTypeWarning, reasonRunFailed, "run function failed: "+err.Error())
	}
}

func (l *LeaderElection) setLeading(v bool) {
	l.leading.Store(v)
	now := l.clock.Now()
	l.lastTransition.Store(&now)
}

// sleep waits d on the election's clock; false when ctx ended first.
func (l *LeaderElection) sleep(ctx context.Context, d time.Duration) bool {
	l.log.Info("waiting before contending again", zap.Duration("backoff", d))
	timer := l.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C():
		return true
	}
}

// backoff is the wait after terms ended by a failed run function.
type backoff struct {
	initial, max time.Duration
}

// after returns the wait after the n-th such term in a row (n >= 1):
// initial, doubling each time, at most max.
func (b backoff) after(n int) time.Duration {
	d := b.initial
	for i := 1; i < n && d < b.max; i++ {
		d *= 2
	}
	return min(d, b.max)
}

// reasonRunFailed is the reason of the Event recorded when a run function
// fails.
const reasonRunFailed = "RunFunctionFailed"
