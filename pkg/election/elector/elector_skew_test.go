package elector

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// These tests run in real time: a leader on the real clock, a follower whose
// clock runs at a different rate, and a partition that cuts the leader off
// right after a renewal. The ledger then shows whether the follower started
// its work while the leader's was still running.
//
// The tolerance the package documents is LeaseDuration - RenewDeadline: the
// leader stops at most RenewDeadline after it sent its last successful renew;
// the follower waits LeaseDuration of its own clock after it saw that renew
// arrive. With a 4s lease and a 2s renew deadline a follower clock up to
// 2x fast (gaining less than 2s over one lease) is safe.

// scaledClock is real time running at rate times its real speed from the
// moment it was made: a node whose clock runs fast (rate > 1) or slow.
type scaledClock struct {
	origin time.Time
	rate   float64
}

var _ clock.WithTicker = scaledClock{}

func newScaledClock(rate float64) scaledClock { return scaledClock{origin: time.Now(), rate: rate} }

func (c scaledClock) Now() time.Time {
	return c.origin.Add(time.Duration(float64(time.Since(c.origin)) * c.rate))
}
func (c scaledClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// realDuration is how long d of this clock lasts in real time.
func (c scaledClock) realDuration(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.rate)
}
func (c scaledClock) After(d time.Duration) <-chan time.Time { return time.After(c.realDuration(d)) }
func (c scaledClock) NewTimer(d time.Duration) clock.Timer {
	return &scaledTimer{c: c, t: time.NewTimer(c.realDuration(d))}
}
func (c scaledClock) Sleep(d time.Duration)                 { time.Sleep(c.realDuration(d)) }
func (c scaledClock) Tick(d time.Duration) <-chan time.Time { return time.Tick(c.realDuration(d)) }
func (c scaledClock) NewTicker(d time.Duration) clock.Ticker {
	return &scaledTicker{time.NewTicker(c.realDuration(d))}
}

type scaledTimer struct {
	c scaledClock
	t *time.Timer
}

func (t *scaledTimer) C() <-chan time.Time        { return t.t.C }
func (t *scaledTimer) Stop() bool                 { return t.t.Stop() }
func (t *scaledTimer) Reset(d time.Duration) bool { return t.t.Reset(t.c.realDuration(d)) }

type scaledTicker struct{ t *time.Ticker }

func (t *scaledTicker) C() <-chan time.Time { return t.t.C }
func (t *scaledTicker) Stop()               { t.t.Stop() }

// faultyLock is a ConfigMap lock whose API calls can be slowed or cut off, as
// if the network between its process and the API server failed.
type faultyLock struct {
	*resourcelock.ConfigMapLock
	// cutAfterWrite makes the next successful write the last one: every
	// call after it hangs until its context ends.
	cutAfterWrite atomic.Bool
	cut           atomic.Bool
	// responseDelay is how long the answer to a successful write takes to
	// come back; the write itself is stored at once.
	responseDelay atomic.Int64
}

func (l *faultyLock) partitioned(ctx context.Context) error {
	if l.cut.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (l *faultyLock) Get(ctx context.Context) (*resourcelock.Record, []byte, error) {
	if err := l.partitioned(ctx); err != nil {
		return nil, nil, err
	}
	return l.ConfigMapLock.Get(ctx)
}

func (l *faultyLock) Create(ctx context.Context, r resourcelock.Record) error {
	if err := l.partitioned(ctx); err != nil {
		return err
	}
	return l.afterWrite(ctx, l.ConfigMapLock.Create(ctx, r))
}

func (l *faultyLock) Update(ctx context.Context, r resourcelock.Record) error {
	if err := l.partitioned(ctx); err != nil {
		return err
	}
	return l.afterWrite(ctx, l.ConfigMapLock.Update(ctx, r))
}

// Observe drops what the watch delivers while the lock is cut off: in a
// partition no events arrive either.
func (l *faultyLock) Observe(obj any, deleted bool) (*resourcelock.Record, []byte, error) {
	if l.cut.Load() {
		return nil, nil, lockwatch.ErrForeignObject
	}
	return l.ConfigMapLock.Observe(obj, deleted)
}

func (l *faultyLock) afterWrite(ctx context.Context, err error) error {
	if err != nil {
		return err
	}
	if l.cutAfterWrite.Load() {
		l.cut.Store(true)
	}
	if d := time.Duration(l.responseDelay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// skewCandidate is an elector that records its terms in a ledger.
type skewCandidate struct {
	le   *LeaderElector
	lock *faultyLock
	stop context.CancelFunc
	done chan struct{}
}

func startSkewCandidate(t *testing.T, client *fake.Clientset, l *ledger.Ledger, identity string, clk clock.WithTicker,
	leaseDuration, renewDeadline, retryPeriod time.Duration, oneTerm bool) *skewCandidate {
	t.Helper()
	// resourcelock.New, unlike NewConfigMapLock, tells the watch that the
	// fake clientset cannot stream lists.
	inner, err := resourcelock.New(resourcelock.ConfigMapsResourceLock, ns, lockName, client, resourcelock.Config{Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	lock := &faultyLock{ConfigMapLock: inner.(*resourcelock.ConfigMapLock)}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Callbacks:   Callbacks{OnStartedLeading: noErr(l.Wrap(lockName, identity, func(ctx context.Context) { <-ctx.Done() }))},
		StopTimeout: (leaseDuration - retryPeriod) / 2,
		Watch:       true,
		Clock:       clk,
		Logger:      zaptest.NewLogger(t).Named(identity),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &skewCandidate{le: le, lock: lock, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			le.Run(ctx)
			if oneTerm {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-c.done })
	return c
}

// partitionResult is what one partitioned-leader run observed.
type partitionResult struct {
	overlap  time.Duration
	takeover time.Duration // from the cut to the follower's first term
	// inconclusive: the leader's term ended before the partition.
	inconclusive bool
}

// partitionOnce runs runPartitionedLeader until a run is conclusive, at
// most three times.
func partitionOnce(t *testing.T, followerRate float64, responseDelay time.Duration,
	leaseDuration, renewDeadline, retryPeriod time.Duration) partitionResult {
	t.Helper()
	for i := 0; i < 3; i++ {
		if res := runPartitionedLeader(t, followerRate, responseDelay, leaseDuration, renewDeadline, retryPeriod); !res.inconclusive {
			return res
		}
		t.Logf("run %d: the leader's term ended before the partition (a loaded machine); running again", i+1)
	}
	t.Fatal("the leader's term ended before the partition in three runs")
	return partitionResult{}
}

// runPartitionedLeader lets a leader on the real clock renew a few times,
// cuts it off right after a renewal (whose answer takes responseDelay), and
// waits until a follower whose clock runs at followerRate takes over.
func runPartitionedLeader(t *testing.T, followerRate float64, responseDelay time.Duration,
	leaseDuration, renewDeadline, retryPeriod time.Duration) partitionResult {
	t.Helper()
	client := kubetest.NewClientset()
	l := &ledger.Ledger{}
	leader := startSkewCandidate(t, client, l, "leader", clock.RealClock{}, leaseDuration, renewDeadline, retryPeriod, true)
	waitFor(t, "the leader to lead", leader.le.IsLeader)
	leader.lock.responseDelay.Store(int64(responseDelay))
	follower := startSkewCandidate(t, client, l, "follower", newScaledClock(followerRate), leaseDuration, renewDeadline, retryPeriod, false)
	waitFor(t, "the follower to see the leader through its watch", func() bool {
		return follower.le.GetLeader() == "leader" && follower.le.watch.Healthy()
	})
	time.Sleep(2 * retryPeriod) // a few renewals, answered late when responseDelay is set
	leader.lock.cutAfterWrite.Store(true)
	for !leader.lock.cut.Load() {
		// On a loaded machine late answers can use up the renew deadline
		// before the partition: the leader then ends its term by itself,
		// and the run shows nothing about skew.
		if !leader.le.IsLeader() {
			return partitionResult{inconclusive: true}
		}
		time.Sleep(time.Millisecond)
	}
	cutAt := time.Now()
	deadline := time.Now().Add(3 * leaseDuration)
	for !follower.le.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatalf("the follower did not take over within %v of the partition", 3*leaseDuration)
		}
		time.Sleep(time.Millisecond)
	}
	takeover := time.Since(cutAt)
	select {
	case <-leader.done:
	case <-time.After(2 * leaseDuration):
		t.Fatal("the partitioned leader never ended its term")
	}
	if leader.le.IsLeader() {
		t.Fatal("the partitioned leader still reports leading")
	}
	return partitionResult{overlap: l.TotalOverlap(), takeover: takeover}
}

func TestClockSkewWithinToleranceNeverOverlaps(t *testing.T) {
	const (
		leaseDuration = 4 * time.Second
		renewDeadline = 2 * time.Second
		retryPeriod   = time.Second
	)
	for _, tc := range []struct {
		name          string
		rate          float64
		responseDelay time.Duration
	}{
		{"same clock rate", 1, 0},
		{"follower clock 50% fast", 1.5, 0},
		// Before meshd timed the renew deadline from when a renew was sent,
		// a leader whose answers came back late kept leading up to that
		// delay longer, and this case overlapped.
		{"follower clock 25% fast, renew answers 900ms late", 1.25, 900 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := partitionOnce(t, tc.rate, tc.responseDelay, leaseDuration, renewDeadline, retryPeriod)
			if res.overlap != 0 {
				t.Fatalf("leaders overlapped for %v (follower clock rate %.2f, tolerance LeaseDuration-RenewDeadline = %v)",
					res.overlap, tc.rate, leaseDuration-renewDeadline)
			}
			// The follower waits one lease of its own clock after the last
			// renew it saw, and the contract allows a RetryPeriod beyond
			// a lease before an election has a leader again (scheduling on
			// a loaded machine took 0.7 s of it in one run).
			if limit := time.Duration(float64(leaseDuration)/tc.rate) + retryPeriod; res.takeover > limit {
				t.Fatalf("takeover took %v after the partition, want at most %v", res.takeover, limit)
			}
		})
	}
}

// TestClockSkewBeyondToleranceCanOverlap shows that the tolerance is a real
// bound, and that the ledger sees the overlap: a follower whose clock runs 3x
// fast waits only 1.33s of real time, while the leader keeps leading for its
// 2s renew deadline.
//
// The overlap is what the skew allows, not what it forces: a follower on a
// loaded machine that sees the leader's last renewal half a second late
// takes over that much later, after the leader has stopped. So the test
// runs the partition up to three times and asks for one overlap.
func TestClockSkewBeyondToleranceCanOverlap(t *testing.T) {
	t.Parallel()
	var overlaps []time.Duration
	for i := 0; i < 3; i++ {
		res := partitionOnce(t, 3, 0, 4*time.Second, 2*time.Second, time.Second)
		if res.overlap >= 200*time.Millisecond {
			return
		}
		overlaps = append(overlaps, res.overlap)
	}
	t.Fatalf("overlaps %v in three runs, want about 670ms in one at least, with a follower clock 3x fast", overlaps)
}
