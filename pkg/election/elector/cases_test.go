package elector

// Eight cases where priorities, handover and faults of the lock object meet,
// each with the fake clock and the fake clientset: candidates that disagree
// about the default, late views, polling holders, a small ttl with slow
// work, a lost confirmation, a re-created lock, a request left behind and a
// holder that does not cooperate.

import (
	"context"
	"errors"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/election/wake"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/metrics"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// countMetrics counts what the elector reports, by kind.
type countMetrics struct {
	metrics.Nop
	mu     sync.Mutex
	counts map[string]int
}

func (m *countMetrics) inc(kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	m.counts[kind]++
}

func (m *countMetrics) get(kind string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[kind]
}

func (m *countMetrics) Stole(string)      { m.inc("stole") }
func (m *countMetrics) StealCycle(string) { m.inc("cycle") }
func (m *countMetrics) RunFailed(string)  { m.inc("runFailed") }
func (m *countMetrics) SetPreemptionSuspended(_ string, v bool) {
	if v {
		m.inc("suspended")
	}
}

// exclusive wraps run callbacks and records whether two ever ran at once.
type exclusive struct {
	running  atomic.Int32
	overlaps atomic.Int32
	starts   atomic.Int32
}

func (x *exclusive) wrap(f func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		x.starts.Add(1)
		if x.running.Add(1) > 1 {
			x.overlaps.Add(1)
		}
		defer x.running.Add(-1)
		return f(ctx)
	}
}

// slowStop is work that takes d of fake time to stop after its context
// ends (at most a few seconds of real time, so that a failing test ends).
func (h *harness) slowStop(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		<-ctx.Done()
		select {
		case <-h.clock.After(d):
		case <-time.After(5 * time.Second):
		}
		return nil
	}
}

// steps advances the fake clock by n x d in steps of at most 250ms, letting
// goroutines run between steps, so that leaders renew in time.
func (h *harness) steps(n int, d time.Duration) {
	total := time.Duration(n) * d
	for total > 0 {
		step := min(total, 250*time.Millisecond)
		time.Sleep(10 * time.Millisecond)
		h.clock.Step(step)
		total -= step
	}
	time.Sleep(10 * time.Millisecond)
}

// Case 1: two candidates that disagree (each outranks the other by its own
// comparison), handover off. Before: hundreds of transitions per second of
// real time with the fake clock standing still.
func TestDisagreeingCandidatesDoNotStorm(t *testing.T) {
	h := newHarness(t)
	ma, mb := &countMetrics{}, &countMetrics{}
	events := &eventSink{}
	a := h.start(candidateOpts{identity: "a", key: "stable", steal: true, noHandover: true, metrics: ma, events: events})
	waitFor(t, "a to lead", a.le.IsLeader)
	b := h.start(candidateOpts{identity: "b", key: "canary", steal: true, noHandover: true, metrics: mb, events: events})
	waitFor(t, "b to take the lock", func() bool { return h.record().HolderIdentity == "b" })
	time.Sleep(300 * time.Millisecond) // the clock stands still: no RetryPeriod passes
	if got := h.record().LeaderTransitions; got > 2 {
		t.Fatalf("%d transitions without a RetryPeriod passing, want at most 2", got)
	}
	// Over 12 RetryPeriods: at most 2 transitions per RetryPeriod, and in
	// fact far fewer once the cycle is detected.
	h.steps(48, 250*time.Millisecond)
	if got := h.record().LeaderTransitions; got > 2+2*12 {
		t.Fatalf("%d transitions over 12 RetryPeriods", got)
	}
	pa, pb := a.le.Preemption(), b.le.Preemption()
	if !pa.Suspended && !pb.Suspended {
		t.Fatalf("no cycle reported: a %v, b %v", pa, pb)
	}
	if ma.get("cycle")+mb.get("cycle") == 0 || ma.get("suspended")+mb.get("suspended") == 0 {
		t.Fatal("cycle not counted in metrics")
	}
	if events.count(corev1.EventTypeWarning, reasonPreemptionSuspended) == 0 {
		t.Fatal("no PreemptionSuspended event")
	}
	if !strings.Contains(pa.String()+pb.String(), "suspended after") {
		t.Fatalf("preemption state not described: %q / %q", pa, pb)
	}
}

// Case 2: the candidate sees the new default before the holder, which
// refuses. Before: the candidate took the lock by force after the grace
// period while the holder's work still ran. Now a refusal is an answer; the
// holder accepts once it sees the same default (Trigger), with no overlap.
//
// It runs in a synctest bubble: the harness's steps let the goroutines run
// between clock steps for 10ms of real time, which a loaded machine may
// not give the holder to renew (it then lost its lease and started again).
// In the bubble a step waits until every goroutine is blocked.
func TestRefusalIsAnAnswerAndIsReconsidered(t *testing.T) {
	synctest.Test(t, testRefusalIsAnAnswerAndIsReconsidered)
}

func testRefusalIsAnAnswerAndIsReconsidered(t *testing.T) {
	h := newHarness(t)
	x := &exclusive{}
	var holderAgrees atomic.Bool
	holder := h.start(candidateOpts{identity: "h", key: "stable", work: x.wrap(waitDone),
		acceptFn: func(string) bool { return holderAgrees.Load() }})
	waitFor(t, "h to lead", holder.le.IsLeader)
	var cStarted atomic.Bool
	c := h.start(candidateOpts{identity: "c", key: "canary", steal: true,
		work: x.wrap(func(ctx context.Context) error { cStarted.Store(true); return waitDone(ctx) })})
	waitFor(t, "the refusal", func() bool { return h.handover().Answer == lockmeta.AnswerRefused })
	h.steps(12, time.Second) // past the old fixed grace of 10s; repeated requests are refused again
	if h.record().HolderIdentity != "h" || c.le.IsLeader() {
		t.Fatalf("the lock moved although the holder refused: %+v", h.record())
	}
	holderAgrees.Store(true)
	holder.le.Trigger()
	waitFor(t, "c to lead", c.le.IsLeader)
	waitFor(t, "c's work", cStarted.Load)
	if x.overlaps.Load() != 0 {
		t.Fatal("the two works overlapped")
	}
	if x.starts.Load() != 2 {
		t.Fatalf("works started %d times, want 2 (h once, c once)", x.starts.Load())
	}
	if rec := h.record(); rec.HolderIdentity != "c" || rec.LeaderTransitions != 1 {
		t.Fatalf("record = %+v, want one handover to c", rec)
	}
}

// Case 3: a polling holder sees the request only at its next renew, then
// takes StopTimeout to stop. Before: the grace was counted from the write of
// the request and the candidate took the lock while the holder's work still
// stopped. Now the candidate waits for the answer, then for the handover.
//
// It runs in a synctest bubble, as TestRefusalIsAnAnswerAndIsReconsidered
// does: on a loaded machine the harness's 10ms of real time between clock
// steps did not always let the polling holder renew, and the candidate,
// unanswered past its grace, took the lock from a holder that had never
// run (once in a make test run beside a simulation).
func TestPollingSlowHolderIsNotPreemptedWhileItStops(t *testing.T) {
	synctest.Test(t, testPollingSlowHolderIsNotPreemptedWhileItStops)
}

func testPollingSlowHolderIsNotPreemptedWhileItStops(t *testing.T) {
	h := newHarness(t)
	x := &exclusive{}
	holder := h.start(candidateOpts{identity: "h", key: "stable", accept: true, poll: true,
		stopTimeout: 2500 * time.Millisecond, work: x.wrap(h.slowStop(2400 * time.Millisecond))})
	waitFor(t, "h to lead", holder.le.IsLeader)
	c := h.start(candidateOpts{identity: "c", key: "canary", steal: true, grace: 1500 * time.Millisecond, work: x.wrap(waitDone)})
	waitFor(t, "c's request", func() bool { return h.handover().Candidate == "c" })
	h.stepUntil(100*time.Millisecond, c.le.IsLeader)
	waitFor(t, "c's work", func() bool { return x.starts.Load() == 2 && x.running.Load() == 1 })
	if x.overlaps.Load() != 0 {
		t.Fatal("the candidate started while the holder's work was still stopping")
	}
	if rec := h.record(); rec.LeaderTransitions != 1 {
		t.Fatalf("record = %+v, want a single handover", rec)
	}
}

func TestTimingRelationsAreValidated(t *testing.T) {
	lock, _ := resourcelock.NewConfigMapLock(kubetest.NewClientset().CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	_, err := New(cooperative(Config{Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		StopTimeout: 3 * time.Second, Callbacks: Callbacks{OnStartedLeading: waitDone}}, time.Second, nil))
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"HandoverGrace 1s must be greater than RetryPeriod 1s", "StopTimeout 3s must be shorter than LeaseDuration - RetryPeriod (3s)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// Case 4: with a 2s ttl and work that drains in 3s, the leader stopped
// renewing while it waited, and a successor could start beside the work.
// Now it renews until the work has returned, reports the overrun in Check,
// and releases only then.
func TestLeaderRenewsWhileItsWorkStops(t *testing.T) {
	h := newHarness(t)
	j := &journal{}
	h.watchReleases(j)
	lock, _ := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	le, err := New(Config{Name: lockName, Lock: lock,
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 250 * time.Millisecond,
		StopTimeout: time.Second, ReleaseOnCancel: true, Clock: h.clock,
		Callbacks: Callbacks{OnStartedLeading: func(ctx context.Context) error {
			j.add("started")
			_ = h.slowStop(3 * time.Second)(ctx)
			j.add("stopped")
			return nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ctx) }()
	h.stepUntil(100*time.Millisecond, func() bool { return j.has("started") })
	cancel()
	time.Sleep(10 * time.Millisecond)
	before := h.record().RenewTime
	// Step past StopTimeout (1s) in small steps, until Check reports the
	// overrun and a renewal is seen, but not as far as the work's 3s: on a
	// loaded machine the elector may lag the fake clock by a few steps.
	renewed := func() bool {
		rec := h.record()
		return rec.HolderIdentity == "a" && rec.RenewTime.After(before.Time)
	}
	for i := 0; i < 28 && (le.Check(time.Hour) == nil || !renewed()); i++ {
		h.steps(1, 100*time.Millisecond)
	}
	if err := le.Check(time.Hour); err == nil {
		t.Fatal("Check passes while the work has outlived StopTimeout")
	}
	if rec := h.record(); !renewed() {
		t.Fatalf("the leader stopped renewing while its work stops: %+v", rec)
	}
	if j.has("stopped") {
		t.Fatal("the work stopped before the overrun was checked; the test stepped too far")
	}
	for i := 0; i < 100 && !j.has("released"); i++ {
		h.steps(1, 100*time.Millisecond)
	}
	<-done
	if got := j.list(); strings.Join(got, ",") != "started,stopped,released" {
		t.Fatalf("order = %v", got)
	}
	if err := le.Check(time.Hour); err != nil {
		t.Fatalf("Check after the work stopped: %v", err)
	}
}

// A run callback that returns ends the term: the lock is released. The
// elector does not supervise the work: it neither counts nor logs the
// failure, and the next Run contends at once (package election backs off).
func TestReturningCallbackEndsTheTermAndRunContendsAgainAtOnce(t *testing.T) {
	for name, cb := range map[string]func(context.Context) error{
		"error": func(context.Context) error { return errors.New("boom") },
		"nil":   func(context.Context) error { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			m := &countMetrics{}
			var starts atomic.Int32
			lock, _ := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
			le, err := New(Config{Name: lockName, Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second,
				RetryPeriod: time.Second, Clock: h.clock, Metrics: m, ReleaseOnCancel: true,
				Callbacks: Callbacks{OnStartedLeading: func(ctx context.Context) error { starts.Add(1); return cb(ctx) }}})
			if err != nil {
				t.Fatal(err)
			}
			le.Run(context.Background())
			if rec := h.record(); rec.HolderIdentity != "" || m.get("runFailed") != 0 || le.LastError() != nil {
				t.Fatalf("record %+v, runFailed %d, LastError %v", rec, m.get("runFailed"), le.LastError())
			}
			// The fake clock stands still: a back-off would keep the
			// second Run from ever starting the callback.
			le.Run(context.Background())
			if n := starts.Load(); n != 2 {
				t.Fatalf("the callback started %d times, want 2", n)
			}
		})
	}
}

// Case 5: a candidate that was handed the lock and whose confirming write
// failed once waited a whole lease; now it retries after a RetryPeriod.
func TestHandedCandidateRetriesAfterARetryPeriod(t *testing.T) {
	h := newHarness(t)
	var fails atomic.Int32
	var armed atomic.Bool
	h.client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap)
		if armed.Load() && strings.Contains(obj.Annotations[resourcelock.LeaderAnnotationKey], `"holderIdentity":"c"`) {
			fails.Add(1)
			return true, nil, apierrors.NewInternalError(errors.New("etcd hiccup"))
		}
		return false, nil, nil
	})
	h.writeRecord(held("c", "stable", 4)) // handed to c by its previous holder
	h.setHandover(`{"holder":"c"}`)
	armed.Store(true)
	c := h.start(candidateOpts{identity: "c", key: "stable"})
	waitFor(t, "a failed write", func() bool { return fails.Load() >= 1 && c.le.watch.Healthy() })
	time.Sleep(50 * time.Millisecond) // writes prompted by watch events fail too
	armed.Store(false)
	if c.le.IsLeader() {
		t.Fatal("c leads although its writes failed")
	}
	h.clock.Step(2300 * time.Millisecond) // RetryPeriod x (1 + JitterFactor) < 2.3s < lease
	waitFor(t, "c to lead", c.le.IsLeader)
}

// Case 6: deleting and re-creating the lock object without a record is not
// a release while the holder's lease runs; the holder writes its record again.
func TestRecreatedLockWithoutRecordIsNotARelease(t *testing.T) {
	synctest.Test(t, testRecreatedLockWithoutRecordIsNotARelease)
}

func testRecreatedLockWithoutRecordIsNotARelease(t *testing.T) {
	h := newHarness(t)
	holder := h.start(candidateOpts{identity: "b"})
	waitFor(t, "b to lead", holder.le.IsLeader)
	f := h.start(candidateOpts{identity: "a"})
	waitFor(t, "a to see b", func() bool { return f.le.GetLeader() == "b" && f.le.watch.Healthy() })
	ctx := context.Background()
	if err := h.client.CoreV1().ConfigMaps(ns).Delete(ctx, lockName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns, Labels: map[string]string{"managed-by": "gitops"}}}
	_, err := h.client.CoreV1().ConfigMaps(ns).Create(ctx, empty, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// The holder saw the deletion and wrote its record first: replace
		// its object by one without a record, as the tool would have.
		cur, getErr := h.client.CoreV1().ConfigMaps(ns).Get(ctx, lockName, metav1.GetOptions{})
		if getErr != nil {
			t.Fatal(getErr)
		}
		empty.ResourceVersion = cur.ResourceVersion
		_, err = h.client.CoreV1().ConfigMaps(ns).Update(ctx, empty, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if f.le.IsLeader() {
		t.Fatal("the follower took a re-created lock while its holder works")
	}
	h.steps(3, time.Second) // the holder renews
	if rec := h.record(); rec.HolderIdentity != "b" || !holder.le.IsLeader() || f.le.IsLeader() {
		t.Fatalf("record %+v, b leads %v, a leads %v", rec, holder.le.IsLeader(), f.le.IsLeader())
	}
}

// Case 6, polling: a follower that reads a re-created object without a
// record keeps waiting: for a lease from when it first saw the object so,
// not for the lease of the record it saw before, since the holder may have
// renewed after that record, unseen, just before the object was wiped.
func TestPollingFollowerWaitsOutRecreatedLock(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "", 4))
	le := h.elector("a", "", nil, nil)
	mustAttempt(t, le, false, heldByOther)
	ctx := context.Background()
	_ = h.client.CoreV1().ConfigMaps(ns).Delete(ctx, lockName, metav1.DeleteOptions{})
	_, _ = h.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns}}, metav1.CreateOptions{})
	h.clock.Step(3 * time.Second)
	mustAttempt(t, le, false, heldByOther) // first seen without a record at t0+3s
	h.clock.Step(1001 * time.Millisecond)
	mustAttempt(t, le, false, heldByOther) // b's record would have run out
	h.clock.Step(3 * time.Second)
	mustAttempt(t, le, false, acquired)
}

// A polling follower whose reads failed while the holder renewed, and that
// then finds the lock object re-created without a record, must not judge
// by the older record it saw: the holder renewed after it and still works.
// Before, it took the empty object one lease after that older record while
// the holder's work ran (simulation seed 100035312, named scenario
// seed-100035312). The same holds for a deleted object.
func TestFollowerThatMissedRenewalsWaitsOutAWipedLock(t *testing.T) {
	for _, recreate := range []bool{true, false} {
		t.Run(map[bool]string{true: "re-created", false: "deleted"}[recreate], func(t *testing.T) {
			h := newHarness(t)
			h.writeRecord(held("b", "", 4))
			le := h.elector("a", "", nil, nil)
			mustAttempt(t, le, false, heldByOther) // sees b's record at t0
			// a's reads fail from here on; b renews at t0+2s, unseen.
			h.clock.Step(2 * time.Second)
			h.renewAs(held("b", "", 4))
			h.clock.Step(500 * time.Millisecond)
			ctx := context.Background()
			_ = h.client.CoreV1().ConfigMaps(ns).Delete(ctx, lockName, metav1.DeleteOptions{})
			if recreate {
				_, _ = h.client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns}}, metav1.CreateOptions{})
			}
			// a reads again at t0+4.5s: b's record as a saw it ran out at t0+4s,
			// but b may work until t0+2s + its lease.
			h.clock.Step(2 * time.Second)
			mustAttempt(t, le, false, heldByOther)
			h.clock.Step(3 * time.Second) // t0+7.5s: past b's real lease
			mustAttempt(t, le, false, heldByOther)
			h.clock.Step(1001 * time.Millisecond) // a lease after a first saw it wiped
			mustAttempt(t, le, false, acquired)
		})
	}
}

// Case 7: a request from 2020 naming a candidate that no longer exists made
// a restarted holder hand the lock to nobody. It is ignored and cleared.
func TestAncientRequestIsIgnored(t *testing.T) {
	synctest.Test(t, testAncientRequestIsIgnored)
}

func testAncientRequestIsIgnored(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("x", "canary", 4))
	h.setHandover(`{"holder":"x","candidate":"ghost","candidateKey":"stable","requestTime":"2020-01-01T00:00:00Z"}`)
	x := h.start(candidateOpts{identity: "x", key: "canary", accept: true})
	waitFor(t, "x to lead", x.le.IsLeader)
	waitFor(t, "the ghost request cleared", func() bool { return h.handover().Candidate == "" })
	h.steps(3, time.Second)
	if rec := h.record(); rec.HolderIdentity != "x" || !x.le.IsLeader() {
		t.Fatalf("record = %+v", rec)
	}
}

// Case 8: a holder that does not cooperate (istiod, client-go) is preempted
// at once, but the run callback starts only when the holder's work must have
// stopped: its last renew as seen here plus its lease.
func TestForcedStealStartsAfterTheOldLease(t *testing.T) {
	for _, atOnce := range []bool{false, true} {
		h := newHarness(t)
		h.writeRecord(held("istiod-a", "canary", 4)) // no handover annotation
		var started atomic.Bool
		c := h.start(candidateOpts{identity: "c", key: "stable", steal: true, startAtOnce: atOnce,
			work: func(ctx context.Context) error { started.Store(true); <-ctx.Done(); return nil }})
		waitFor(t, "c to take the lock", func() bool { return h.record().HolderIdentity == "c" })
		if atOnce {
			waitFor(t, "the work to start at once", started.Load)
			continue
		}
		h.steps(39, 100*time.Millisecond) // 3.9s after the holder's record was seen
		if started.Load() {
			t.Fatal("work started while the old holder's lease ran")
		}
		if !c.le.IsLeader() || h.record().HolderIdentity != "c" {
			t.Fatal("the lock was not kept while waiting")
		}
		h.stepUntil(100*time.Millisecond, started.Load)
	}
}

// Lock-kind migration: an elector on a multi lock holds the ConfigMap and
// the Lease together, so it excludes instances that use either kind alone.
func TestMultiLockElectorHoldsBothKinds(t *testing.T) {
	h := newHarness(t)
	lock, err := resourcelock.New(resourcelock.ConfigMapsLeasesResourceLock, ns, lockName, h.client, resourcelock.Config{Identity: "m", Key: "stable"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(Config{Name: lockName, Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second,
		RetryPeriod: time.Second, Clock: h.clock, Callbacks: Callbacks{OnStartedLeading: waitDone}})
	if err != nil {
		t.Fatal(err)
	}
	mustAttempt(t, le, false, acquired)
	mustAttempt(t, le, true, acquired)
	lease, err := h.client.CoordinationV1().Leases(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	if err != nil || *lease.Spec.HolderIdentity != "m" {
		t.Fatalf("lease %+v, %v", lease, err)
	}
	if rec := h.record(); rec.HolderIdentity != "m" {
		t.Fatalf("configmap record %+v", rec)
	}
	// A ConfigMap-only candidate sees the holder and waits.
	other := h.elector("old", "", nil, nil)
	mustAttempt(t, other, false, heldByOther)
	if _, err := New(Config{Name: lockName, Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second,
		RetryPeriod: time.Second, Watch: true, Callbacks: Callbacks{OnStartedLeading: waitDone}}); err == nil {
		t.Fatal("a multi lock was accepted for watching")
	}
}

// fixedSource is a rand.Source that always draws half of its range: a
// jittered retry period of RetryPeriod × (1 + JitterFactor/2).
type fixedSource struct{}

func (fixedSource) Int63() int64 { return 1 << 62 }
func (fixedSource) Seed(int64)   {}

// A watching follower whose holder's lease has run out, facing a lock
// object re-created without a record, waits a lease from when it saw the
// object so, and wakes when that wait ends. Before, it slept a whole
// jittered retry period from its last failed attempt instead, up to 2.2
// retry periods past the end of the wait: an election without a leader
// for 5.016 s against a bound of LeaseDuration + RetryPeriod (5 s) in
// simulation session seed 200031713 (with the jitter the simulation drew
// then; its draws now land in time by chance).
func TestWatchingFollowerWakesWhenAWipedLockMayBeTaken(t *testing.T) {
	h := newHarness(t)
	lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks: Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })},
		Watch:     true, Clock: h.clock, Rand: rand.New(fixedSource{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	le.watch.MarkHealthy(true) // a working watch, as the hub would report it
	rec := held("b", "", 4)
	le.observe(&rec, resourcelock.EncodeRecord(rec), t0) // b's lease runs out at t0+4s
	h.clock.Step(3 * time.Second)
	le.noteEmpty(nil, h.clock.Now()) // re-created without a record at t0+3s: held until t0+7s
	h.clock.Step(3 * time.Second)    // t0+6s: b's lease is over, the wiped lock's wait is not
	if !le.emptyMayBeHeld(h.clock.Now(), false) {
		t.Fatal("the wiped lock counts as free before a lease from when it was seen so")
	}
	if got, want := le.followerWait(), time.Second+wake.Slack; got != want {
		t.Fatalf("follower waits %v, want %v: until the wiped lock may be taken", got, want)
	}
	h.clock.Step(500 * time.Millisecond) // a later wake-up does not stretch the wait either
	if got, want := le.followerWait(), 500*time.Millisecond+wake.Slack; got != want {
		t.Fatalf("follower waits %v, want %v", got, want)
	}
}
