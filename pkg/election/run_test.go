package election

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/metrics"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

// runInBackground runs le until the test ends and returns a function that
// stops it and waits for RunContext to return.
func runInBackground(t *testing.T, le *LeaderElection) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := le.RunContext(ctx); err != nil {
			t.Errorf("RunContext: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// runFailures counts RunFailed calls on top of an metrics.Metrics that
// ignores everything else.
type runFailures struct {
	metrics.Metrics
	n atomic.Int32
}

func (m *runFailures) RunFailed(name string) {
	if name == IngressController {
		m.n.Add(1)
	}
}

// TestFailingRunFunctionEndsTheTerm: one run function fails (an error, or a
// panic); the other is cancelled and awaited, the failure is recorded, and
// the lock is released for others.
func TestFailingRunFunctionEndsTheTerm(t *testing.T) {
	for name, fail := range map[string]func() error{
		"error": func() error { return errors.New("cannot sync") },
		"panic": func() error { panic("nil map") },
	} {
		t.Run(name, func(t *testing.T) {
			client := kubetest.NewClientset()
			metrics := &runFailures{Metrics: metrics.Nop{}}
			le := mustElection(t)(NewLeaderElection(testNS, "a", IngressController, "stable", client, WithTTL(2*time.Second),
				WithDefaultWatcher(defaultwatch.NewStatic("")), withRunBackoff(time.Hour, time.Hour), withMetrics(metrics)))
			trigger, otherStopped := make(chan struct{}), make(chan struct{})
			le.Add(func(ctx context.Context) error {
				<-ctx.Done()
				close(otherStopped)
				return nil
			})
			le.Add(func(ctx context.Context) error {
				<-trigger
				return fail()
			})
			runInBackground(t, le)
			eventually(t, "a to lead", func() bool { return lockHolder(t, client, IngressController).HolderIdentity == "a" && le.IsLeader() })

			close(trigger)
			<-otherStopped
			eventually(t, "the lock to be released", func() bool { return lockHolder(t, client, IngressController).HolderIdentity == "" })
			st := le.Status()
			if st.Leader || st.RunFailures != 1 || metrics.n.Load() != 1 {
				t.Fatalf("status %+v, metric %d; want a follower with one run failure", st, metrics.n.Load())
			}
			if want := map[string]string{"error": "cannot sync", "panic": "run function panicked: nil map"}[name]; st.LastRunError != want {
				t.Fatalf("LastRunError = %q, want %q", st.LastRunError, want)
			}
		})
	}
}

// TestBackoffAfterFailedTerms: with elections disabled and a fake clock, a
// run function that always fails is restarted after 1s, 2s, 4s, then 4s
// (the cap), and never earlier.
func TestBackoffAfterFailedTerms(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	le := mustElection(t)(NewLeaderElection(testNS, "a", IngressController, "stable", nil,
		WithEnabled(false), withClock(clk), withRunBackoff(time.Second, 4*time.Second)))
	var starts atomic.Int32
	le.Add(func(context.Context) error {
		starts.Add(1)
		return errors.New("always fails")
	})
	runInBackground(t, le)
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		want := int32(i + 1)
		eventually(t, "the back-off timer", func() bool { return starts.Load() == want && clk.HasWaiters() })
		clk.Step(wait - time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		if got := starts.Load(); got != want {
			t.Fatalf("start %d came before its back-off of %v", got, wait)
		}
		clk.Step(time.Millisecond)
		eventually(t, "the next start", func() bool { return starts.Load() == want+1 })
	}
	if got := le.Status().RunFailures; got < 5 {
		t.Fatalf("RunFailures = %d, want at least 5", got)
	}
}

// TestFailingWorkMovesTheLockAtMostOncePerRetryPeriod: the election alone
// backs off after a failure, and never for less than a RetryPeriod, however
// short withRunBackoff asks for, so that failing work moves the lock at
// most once per RetryPeriod.
func TestFailingWorkMovesTheLockAtMostOncePerRetryPeriod(t *testing.T) {
	client := kubetest.NewClientset()
	clk := clocktesting.NewFakeClock(time.Now())
	le := mustElection(t)(NewLeaderElection(testNS, "a", IngressController, "stable", client, WithTTL(4*time.Second),
		withClock(clk), WithDefaultWatcher(defaultwatch.NewStatic("")), withRunBackoff(time.Millisecond, time.Millisecond)))
	var starts atomic.Int32
	le.Add(func(context.Context) error {
		starts.Add(1)
		return errors.New("always fails")
	})
	runInBackground(t, le)
	eventually(t, "the first failure to release the lock", func() bool {
		return starts.Load() == 1 && le.Status().RunFailures == 1 && lockHolder(t, client, IngressController).HolderIdentity == ""
	})
	for i := 0; i < 9; i++ { // 900ms: under the RetryPeriod of a 4s ttl
		clk.Step(100 * time.Millisecond)
		time.Sleep(5 * time.Millisecond)
	}
	if n := starts.Load(); n != 1 {
		t.Fatalf("the work started again %d time(s) within a RetryPeriod of its failure", n-1)
	}
	eventually(t, "the work to start again after a RetryPeriod", func() bool {
		clk.Step(50 * time.Millisecond)
		return starts.Load() == 2
	})
}

func TestBackoffIsBounded(t *testing.T) {
	b := backoff{initial: time.Second, max: time.Minute}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 6: 32 * time.Second, 7: time.Minute, 1 << 30: time.Minute} {
		if got := b.after(n); got != want {
			t.Errorf("after(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestRunFunctionsThatReturnKeepTheTerm: a nil return ends only that
// function; when all have returned the instance keeps leading, as istiod's
// elections do, and releases the lock only when stopped.
func TestRunFunctionsThatReturnKeepTheTerm(t *testing.T) {
	client := kubetest.NewClientset()
	le := mustElection(t)(NewLeaderElection(testNS, "a", IngressController, "stable", client, WithTTL(2*time.Second),
		WithDefaultWatcher(defaultwatch.NewStatic(""))))
	returned := make(chan struct{}, 2)
	le.Add(func(context.Context) error { returned <- struct{}{}; return nil })
	le.AddRunFunction(func(<-chan struct{}) { returned <- struct{}{} })
	stop := runInBackground(t, le)
	<-returned
	<-returned
	time.Sleep(1200 * time.Millisecond) // past the renew deadline: the term must have been renewed
	if !le.IsLeader() || lockHolder(t, client, IngressController).HolderIdentity != "a" || le.cycle.Load() != 1 {
		t.Fatalf("after every run function returned: leader %v, cycle %d, record %+v", le.IsLeader(), le.cycle.Load(), lockHolder(t, client, IngressController))
	}
	stop()
	if h := lockHolder(t, client, IngressController).HolderIdentity; h != "" {
		t.Fatalf("holder %q after Run returned, want the lock released", h)
	}
	if st := le.Status(); st.RunFailures != 0 || st.LastRunError != "" {
		t.Fatalf("status %+v: a nil return is no failure", st)
	}
}

func TestTermFromRunFunction(t *testing.T) {
	client := kubetest.NewClientset()
	le := mustElection(t)(NewLeaseLeaderElection(testNS, "a", StatusController, "stable", client, WithTTL(2*time.Second),
		WithDefaultWatcher(defaultwatch.NewStatic(""))))
	terms := make(chan Term, 1)
	le.Add(func(ctx context.Context) error {
		term, ok := TermFrom(ctx)
		if !ok {
			t.Error("no term in the run function's context")
		}
		terms <- term
		<-ctx.Done()
		return nil
	})
	runInBackground(t, le)
	term := <-terms
	lease, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), StatusController, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := Term{Lock: testNS + "/" + StatusController, Identity: "a", Transitions: int(*lease.Spec.LeaseTransitions),
		AcquireTime: lease.Spec.AcquireTime.Time, Elected: true}
	if !term.AcquireTime.Equal(want.AcquireTime) || term.Lock != want.Lock || term.Identity != want.Identity ||
		term.Transitions != want.Transitions || !term.Elected {
		t.Fatalf("term %+v, want %+v", term, want)
	}
	if _, ok := TermFrom(context.Background()); ok {
		t.Fatal("a plain context has a term")
	}
	if !strings.Contains(term.String(), "istio-status-leader term") {
		t.Fatalf("String() = %q", term.String())
	}
}

func TestRunTwiceAndAddAfterRun(t *testing.T) {
	le := mustElection(t)(NewLeaderElection(testNS, "a", IngressController, "stable", nil, WithEnabled(false)))
	started := make(chan struct{})
	le.Add(func(ctx context.Context) error { close(started); <-ctx.Done(); return nil })
	runInBackground(t, le)
	<-started
	if err := le.RunContext(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second RunContext: %v", err)
	}
	le.Add(func(context.Context) error { t.Error("a function added after Run ran"); return nil })
}
