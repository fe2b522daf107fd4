package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/election/testknobs"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// ledgered starts an election whose run function is recorded in l.
func ledgered(t *testing.T, l *ledger.Ledger, name string, le *election.LeaderElection, err error) *instance {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	work := l.Wrap(le.Status().ID, name, func(ctx context.Context) { <-ctx.Done() })
	le.Add(func(ctx context.Context) error { work(ctx); return nil })
	return newInstance(t, name, le, nil)
}

func TestRepeatedDefaultFlipsHandOverWithoutOverlap(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	l := &ledger.Ledger{}
	m := &countingMetrics{}
	le, err := election.NewLeaderElection(ns, "canary-1", election.NamespaceController, "canary", c.Client, opts(t, testknobs.Metrics(m))...)
	canary := ledgered(t, l, "canary-1", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("canary to lead", canary.leads))
	le, err = election.NewLeaderElection(ns, "stable-1", election.NamespaceController, "stable", c.Client, opts(t, testknobs.Metrics(m))...)
	stable := ledgered(t, l, "stable-1", le, err)

	const flips = 10
	for i := 0; i < flips; i++ {
		want, other, rev := stable, canary, "stable"
		if i%2 == 1 {
			want, other, rev = canary, stable, "canary"
		}
		setDefaultRevision(t, c.Client, ns, rev)
		testutil.Eventually(t, 10*time.Second, testutil.Check(want.name+" to lead after flip", func() bool { return want.leads() && !other.leads() }))
	}
	rec, _ := configMapRecord(t, c.Client, ns, election.NamespaceController)
	if rec.HolderIdentity != "canary-1" {
		t.Fatalf("after %d flips the holder is %q, want canary-1", flips, rec.HolderIdentity)
	}
	if rec.LeaderTransitions != flips {
		t.Fatalf("transitions = %d, want %d (one per flip, no thrash)", rec.LeaderTransitions, flips)
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders ran at once: %+v", o)
	}
	if got := l.Starts(election.NamespaceController); got != flips+1 {
		t.Fatalf("terms = %d, want %d", got, flips+1)
	}
	// Every flip was a cooperative handover; none fell back to force.
	if handed, stolen := m.count("handedOver"), m.count("stole"); handed != flips || stolen != 0 {
		t.Fatalf("handovers = %d, forced steals = %d; want %d and 0", handed, stolen, flips)
	}
}

// countingMetrics counts elector events by kind.
type countingMetrics struct {
	mu     sync.Mutex
	counts map[string]int
}

func (m *countingMetrics) inc(kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	m.counts[kind]++
}

func (m *countingMetrics) count(kind string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[kind]
}

func (m *countingMetrics) SetLeading(string, bool)             {}
func (m *countingMetrics) Acquired(string)                     { m.inc("acquired") }
func (m *countingMetrics) Stole(string)                        { m.inc("stole") }
func (m *countingMetrics) RenewFailed(string)                  { m.inc("renewFailed") }
func (m *countingMetrics) Lost(string)                         { m.inc("lost") }
func (m *countingMetrics) HandoverRequested(string)            { m.inc("handoverRequested") }
func (m *countingMetrics) HandedOver(string)                   { m.inc("handedOver") }
func (m *countingMetrics) Request(_ string, verb string)       { m.inc("request:" + verb) }
func (m *countingMetrics) StealCycle(string)                   { m.inc("stealCycle") }
func (m *countingMetrics) SetPreemptionSuspended(string, bool) {}
func (m *countingMetrics) RunFailed(string)                    { m.inc("runFailed") }
func (m *countingMetrics) SlowPath(string)                     { m.inc("slowPath") }

// fakeHolder keeps a lock renewed by hand, as a holder that never answers
// handover requests would. With advertise it claims to be cooperative (a
// hung meshd); without, it looks like istiod.
func fakeHolder(t *testing.T, ns, name string, advertise bool) (stop func()) {
	t.Helper()
	c := testcluster.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	write := func() error {
		now := metav1.NewTime(time.Now())
		// The lease of the tests' ttl: a candidate that takes the lock by
		// force starts its work only once this lease has run out.
		rec := resourcelock.Record{HolderIdentity: "hung-1", HolderKey: "canary", LeaseDurationSeconds: int(ttl / time.Second),
			AcquireTime: metav1.NewTime(time.Unix(1700000000, 0)), RenewTime: now, LeaderTransitions: 7}
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cur, derr := resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey]))
		if derr == nil && cur.HolderIdentity != "" && cur.HolderIdentity != "hung-1" {
			return nil // taken over: a real holder would now follow
		}
		cm.Annotations[resourcelock.LeaderAnnotationKey] = string(resourcelock.EncodeRecord(rec))
		if advertise {
			if _, ok := cm.Annotations[lockmeta.HandoverAnnotationKey]; !ok {
				cm.Annotations[lockmeta.HandoverAnnotationKey] = `{"holder":"hung-1"}`
			}
		}
		if cm.ResourceVersion == "" {
			_, err = c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		} else {
			_, err = c.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		}
		return err
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		ticker := time.NewTicker(ttl / 4)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				_ = write() // conflicts with the candidate's writes are expected
			}
		}
	}()
	return func() { cancel(); <-done }
}

func TestHungCooperativeHolderIsPreemptedAfterGrace(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	stop := fakeHolder(t, ns, election.NamespaceController, true)
	defer stop()
	setDefaultRevision(t, c.Client, ns, "stable")
	const grace = 1500 * time.Millisecond
	le, err := election.NewLeaderElection(ns, "stable-1", election.NamespaceController, "stable", c.Client,
		opts(t, election.WithHandover(true, grace))...)
	started := time.Now()
	stable := newInstance(t, "stable-1", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a handover request", func() bool {
		_, cm := configMapRecord(t, c.Client, ns, election.NamespaceController)
		return cm.Annotations[lockmeta.HandoverAnnotationKey] != "" &&
			strings.Contains(cm.Annotations[lockmeta.HandoverAnnotationKey], `"candidate":"stable-1"`)
	}))
	testutil.Eventually(t, 10*time.Second, testutil.Check("stable to take the lock after the grace period", stable.leads))
	if waited := stable.lastStart().Sub(started); waited < grace {
		t.Fatalf("took the lock %v after starting, before the %v grace period", waited, grace)
	}
	if rec, _ := configMapRecord(t, c.Client, ns, election.NamespaceController); rec.HolderIdentity != "stable-1" || rec.LeaderTransitions != 8 {
		t.Fatalf("record = %+v", rec)
	}
}

func TestIstiodHolderIsPreemptedWithoutWaiting(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	stop := fakeHolder(t, ns, election.NamespaceController, false)
	defer stop()
	setDefaultRevision(t, c.Client, ns, "stable")
	le, err := election.NewLeaderElection(ns, "stable-1", election.NamespaceController, "stable", c.Client,
		opts(t, election.WithHandover(true, time.Hour))...)
	stable := newInstance(t, "stable-1", le, err)
	// An hour of grace would fail this test if the candidate waited for an
	// answer that an istiod holder never gives.
	testutil.Eventually(t, 10*time.Second, testutil.Check("stable to take the lock", stable.leads))
	_, cm := configMapRecord(t, c.Client, ns, election.NamespaceController)
	if raw := cm.Annotations[lockmeta.HandoverAnnotationKey]; strings.Contains(raw, "candidate") {
		t.Fatalf("asked an istiod holder to hand over: %s", raw)
	}
}
