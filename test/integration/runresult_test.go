package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/election/testknobs"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
)

// failable is a candidate with two run functions: one recorded in the
// ledger that runs until its term ends, and one that fails on demand.
type failable struct {
	*instance
	fail chan func() error
}

func newFailable(t *testing.T, c *testcluster.Cluster, l *ledger.Ledger, ns, name string) *failable {
	t.Helper()
	le, err := election.NewLeaderElection(ns, name, election.IngressController, "stable", c.Client,
		opts(t, testknobs.RunBackoff(200*time.Millisecond, time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	f := &failable{fail: make(chan func() error)}
	work := l.Wrap(election.IngressController, name, func(ctx context.Context) { <-ctx.Done() })
	le.Add(func(ctx context.Context) error { work(ctx); return nil })
	le.Add(func(ctx context.Context) error {
		select {
		case fail := <-f.fail:
			return fail()
		case <-ctx.Done():
			return nil
		}
	})
	f.instance = newInstance(t, name, le, nil)
	return f
}

// failNow makes the leading candidate's failing run function fail, and
// returns when it began to fail.
func (f *failable) failNow(t *testing.T, fail func() error) time.Time {
	t.Helper()
	at := make(chan time.Time, 1)
	select {
	case f.fail <- func() error { at <- time.Now(); return fail() }:
		return <-at
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the failing run function is not running", f.name)
		return time.Time{}
	}
}

// follows reports whether f is in its n-th contention (or a later one) and
// has seen holder lead in it: f contends, with its watch of the lock open.
func (f *failable) follows(n int32, holder string) func() bool {
	return func() bool {
		st := f.le.Status()
		return st.Cycle >= n && st.Holder == holder && !f.leads()
	}
}

// contentions notes when each candidate was first seen in each of its
// contentions (Status().Cycle), sampled every few milliseconds until the
// test ends. A time noted is never before the contention began.
type contentions struct {
	mu   sync.Mutex
	seen map[string]map[int32]time.Time
}

func watchContentions(t *testing.T, fs ...*failable) *contentions {
	c := &contentions{seen: map[string]map[int32]time.Time{}}
	for _, f := range fs {
		c.seen[f.name] = map[int32]time.Time{}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, f := range fs {
				n, now := f.le.Status().Cycle, time.Now()
				c.mu.Lock()
				if _, ok := c.seen[f.name][n]; !ok {
					c.seen[f.name][n] = now
				}
				c.mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return c
}

// began is when name was first seen in its n-th contention; zero if not yet.
func (c *contentions) began(name string, n int32) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[name][n]
}

// backedOff fails the test unless name's contention n, the one after a
// failure at failed, began at least a back-off after that failure. It waits
// for that contention to begin.
func (c *contentions) backedOff(t *testing.T, name string, n int32, failed time.Time, backoff time.Duration) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, testutil.Check(fmt.Sprintf("%s to contend again", name), func() bool {
		return !c.began(name, n).IsZero()
	}))
	if after := c.began(name, n).Sub(failed); after < backoff {
		t.Fatalf("%s contended again %v after its run function failed, want a back-off of at least %v", name, after, backoff)
	}
}

// TestFailingRunFunctionHandsTheLockOver: a run function that returns an
// error ends its leader's term; the other candidate, contending, takes over,
// and when one of its run functions panics the lock comes back. A candidate
// whose work failed contends again only after a back-off (at least a
// RetryPeriod), which is what lets the other one take the lock. The ledger
// shows that no run functions of the two ever ran at the same time.
//
// Each failure comes only once the other candidate contends again and
// follows the holder: a candidate still backing off from its own failure
// does not contend, and two candidates whose back-offs end together are
// equally entitled to the lock, so which of them gets it is not promised.
func TestFailingRunFunctionHandsTheLockOver(t *testing.T) {
	const backoff = ttl / 4 // the RetryPeriod, above WithRunBackoff's 200ms
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	l := &ledger.Ledger{}
	a := newFailable(t, c, l, ns, "a")
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
	b := newFailable(t, c, l, ns, "b")
	cs := watchContentions(t, a, b)
	testutil.Eventually(t, 10*time.Second, testutil.Check("b to follow a", b.follows(1, "a")))

	failed := a.failNow(t, func() error { return errors.New("cannot reconcile") })
	testutil.Eventually(t, 10*time.Second, testutil.Check("b to take over after a's error", func() bool { return b.leads() && !a.leads() }))
	t.Logf("handover after an error: %v", b.lastStart().Sub(failed).Round(time.Millisecond))
	if st := a.le.Status(); st.RunFailures != 1 || st.LastRunError != "cannot reconcile" {
		t.Fatalf("a's status %+v, want one run failure, cannot reconcile", st)
	}
	cs.backedOff(t, "a", 2, failed, backoff)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to follow b after its back-off", a.follows(2, "b")))

	failed = b.failNow(t, func() error { panic("nil map") })
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to take over after b's panic", func() bool { return a.leads() && !b.leads() }))
	t.Logf("handover after a panic: %v", a.lastStart().Sub(failed).Round(time.Millisecond))
	if st := b.le.Status(); st.RunFailures != 1 || !strings.Contains(st.LastRunError, "panicked: nil map") {
		t.Fatalf("b's status %+v, want one run failure naming the panic", st)
	}
	cs.backedOff(t, "b", 2, failed, backoff)

	if o := l.TotalOverlap(); o != 0 {
		t.Fatalf("the run functions of a and b overlapped for %v: %+v", o, l.Overlaps())
	}
	if got := l.Starts(election.IngressController); got != 3 {
		t.Fatalf("terms = %d, want 3 (a, b, a)", got)
	}
	rec, _ := configMapRecord(t, c.Client, ns, election.IngressController)
	if rec.HolderIdentity != "a" || rec.LeaderTransitions != 2 {
		t.Fatalf("record %+v, want a after two transitions", rec)
	}
}
