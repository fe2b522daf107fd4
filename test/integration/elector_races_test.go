package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgolock "k8s.io/client-go/tools/leaderelection"
	clientgorl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// runElector runs a meshd elector until the returned stop function is
// called; stop waits for it. Its work is recorded in l.
func runElector(t *testing.T, cfg elector.Config, l *ledger.Ledger, holder string) (*elector.LeaderElector, func()) {
	t.Helper()
	cfg.Callbacks.OnStartedLeading = func(ctx context.Context) error {
		l.Wrap(cfg.Name, holder, func(ctx context.Context) { <-ctx.Done() })(ctx)
		return nil
	}
	cfg.Logger = zaptest.NewLogger(t).Named(holder)
	le, err := elector.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			le.Run(ctx)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return le, stop
}

// Two candidates that each outrank the other (they disagree about the
// default revision) on the real API server, handover off: the steal damper
// keeps transitions to at most two per RetryPeriod, and the disagreement
// shows in Preemption.
func TestDisagreeingCandidatesAreDampedOnTheAPIServer(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	l := &ledger.Ledger{}
	lease, renew, retry := elector.TimingFromTTL(ttl)
	var electors []*elector.LeaderElector
	for _, name := range []string{"stable-1", "canary-1"} {
		lock, err := resourcelock.New(resourcelock.ConfigMapsResourceLock, ns, "istio-leader", c.Client,
			resourcelock.Config{Identity: name, Key: name})
		if err != nil {
			t.Fatal(err)
		}
		le, _ := runElector(t, elector.Config{Name: "istio-leader", Lock: lock, LeaseDuration: lease, RenewDeadline: renew,
			RetryPeriod: retry, Watch: true, ReleaseOnCancel: true,
			KeyComparison: func(string) bool { return true }}, l, name)
		electors = append(electors, le)
	}
	const window = 6 * time.Second
	start := time.Now()
	time.Sleep(window)
	rec, _ := configMapRecord(t, c.Client, ns, "istio-leader")
	periods := int(time.Since(start) / retry)
	t.Logf("%d transitions in %v (%d RetryPeriods); preemption: %v / %v", rec.LeaderTransitions, time.Since(start).Round(time.Millisecond),
		periods, electors[0].Preemption(), electors[1].Preemption())
	if rec.LeaderTransitions > 2*periods {
		t.Fatalf("%d transitions in %d RetryPeriods, want at most 2 per RetryPeriod", rec.LeaderTransitions, periods)
	}
	if !electors[0].Preemption().Suspended && !electors[1].Preemption().Suspended {
		t.Fatal("the disagreement is not reported by either candidate")
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders ran at once: %+v", o)
	}
}

// A holder of client-go's shape (client-go's own elector, which knows
// nothing of holder keys or handover) is preempted by force; meshd's work
// starts only once the holder's work must have stopped. 20 trials, each on
// a lock of its own, run side by side: no overlap in any.
func TestForcedStealFromClientGoHolderNeverOverlaps(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	lease, renew, retry := elector.TimingFromTTL(ttl)
	const trials = 20
	for i := 0; i < trials; i++ {
		name := fmt.Sprintf("lock-%d", i)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l := &ledger.Ledger{}
			stopHolder := runClientGoHolder(t, c, ns, name, l, lease, renew, retry)
			lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, name, c.Client, resourcelock.Config{Identity: "meshd", Key: "stable"})
			if err != nil {
				t.Fatal(err)
			}
			le, stop := runElector(t, elector.Config{Name: name, Lock: lock, LeaseDuration: lease, RenewDeadline: renew,
				RetryPeriod: retry, Watch: true, ReleaseOnCancel: true,
				KeyComparison: func(holderKey string) bool { return holderKey == "" }}, l, "meshd")
			testutil.Eventually(t, 3*lease, testutil.Check("meshd's work to start", func() bool { return l.Starts(name) >= 2 && le.IsLeader() }))
			stop()
			stopHolder()
			if o := l.Overlaps(); len(o) != 0 {
				t.Fatalf("the works overlapped: %+v", o)
			}
			if n := l.Starts(name); n != 2 {
				t.Fatalf("%d terms, want 2", n)
			}
		})
	}
}

// runClientGoHolder runs client-go's elector on the Lease ns/name until it
// leads, and returns a function that stops it and waits.
func runClientGoHolder(t *testing.T, c *testcluster.Cluster, ns, name string, l *ledger.Ledger, lease, renew, retry time.Duration) func() {
	t.Helper()
	lock := &clientgorl.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: name},
		Client:     c.Client.CoordinationV1(),
		LockConfig: clientgorl.ResourceLockConfig{Identity: "istiod-like"},
	}
	leading := make(chan struct{})
	work := l.Wrap(name, "istiod-like", func(ctx context.Context) { <-ctx.Done() })
	le, err := clientgolock.NewLeaderElector(clientgolock.LeaderElectionConfig{
		Lock: lock, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
		Callbacks: clientgolock.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { close(leading); work(ctx) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ctx) }()
	select {
	case <-leading:
	case <-time.After(3 * lease):
		cancel()
		<-done
		t.Fatal("client-go's elector did not lead")
	}
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}
