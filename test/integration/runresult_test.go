package integration

import (
	"context"
	"errors"
	"strings"
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

// failNow makes the leading candidate's failing run function fail.
func (f *failable) failNow(t *testing.T, fail func() error) time.Time {
	t.Helper()
	select {
	case f.fail <- fail:
		return time.Now()
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the failing run function is not running", f.name)
		return time.Time{}
	}
}

// TestFailingRunFunctionHandsTheLockOver: a run function that returns an
// error ends its leader's term; the other candidate takes over, and when one
// of its run functions panics the lock comes back. The ledger shows that no
// run functions of the two ever ran at the same time.
func TestFailingRunFunctionHandsTheLockOver(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	l := &ledger.Ledger{}
	a := newFailable(t, c, l, ns, "a")
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
	b := newFailable(t, c, l, ns, "b")

	failed := a.failNow(t, func() error { return errors.New("cannot reconcile") })
	testutil.Eventually(t, 10*time.Second, testutil.Check("b to take over after a's error", func() bool { return b.leads() && !a.leads() }))
	t.Logf("handover after an error: %v", b.lastStart().Sub(failed).Round(time.Millisecond))
	if st := a.le.Status(); st.RunFailures != 1 || st.LastRunError != "cannot reconcile" {
		t.Fatalf("a's status %+v, want one run failure, cannot reconcile", st)
	}

	failed = b.failNow(t, func() error { panic("nil map") })
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to take over after b's panic", func() bool { return a.leads() && !b.leads() }))
	t.Logf("handover after a panic: %v", a.lastStart().Sub(failed).Round(time.Millisecond))
	if st := b.le.Status(); st.RunFailures != 1 || !strings.Contains(st.LastRunError, "panicked: nil map") {
		t.Fatalf("b's status %+v, want one run failure naming the panic", st)
	}

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
