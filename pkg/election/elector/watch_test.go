package elector

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"go.uber.org/zap/zaptest"

	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// candidate is a watching, cooperative elector run in the background.
type candidate struct {
	le   *LeaderElector
	stop context.CancelFunc
	done chan struct{}
}

type candidateOpts struct {
	identity, key string
	steal         bool // KeyComparison result
	accept        bool // AcceptHandover result
	grace         time.Duration
	ledger        *ledger.Ledger
	// Optional: comparison and acceptance that may change during a test,
	// the work, no handover, polling instead of watching, and timings.
	stealFn, acceptFn func(string) bool
	work              func(context.Context) error
	noHandover, poll  bool
	stopTimeout       time.Duration
	startAtOnce       bool
	metrics           *countMetrics
	events            *eventSink
}

func (h *harness) start(o candidateOpts) *candidate {
	h.t.Helper()
	lockCfg := resourcelock.Config{Identity: o.identity, Key: o.key, Cooperative: true}
	if o.events != nil {
		lockCfg.EventRecorder = o.events
	}
	lock, err := resourcelock.New(resourcelock.ConfigMapsResourceLock, ns, lockName, h.client, lockCfg)
	if err != nil {
		h.t.Fatal(err)
	}
	if o.grace == 0 {
		o.grace = 10 * time.Second
	}
	work := o.work
	if work == nil {
		work = waitDone
	}
	if o.ledger != nil {
		inner := work
		work = noErr(o.ledger.Wrap(lockName, o.identity, func(ctx context.Context) { _ = inner(ctx) }))
	}
	if o.stealFn == nil {
		o.stealFn = func(string) bool { return o.steal }
	}
	if o.acceptFn == nil {
		o.acceptFn = func(string) bool { return o.accept }
	}
	if o.noHandover {
		o.grace = 0
	}
	if o.metrics == nil {
		o.metrics = &countMetrics{}
	}
	if o.stopTimeout == 0 {
		o.stopTimeout = time.Second
	}
	le, err := New(cooperative(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:             Callbacks{OnStartedLeading: work},
		KeyComparison:         o.stealFn,
		StopTimeout:           o.stopTimeout,
		StartAtOnceAfterSteal: o.startAtOnce,
		ReleaseOnCancel:       true,
		Watch:                 !o.poll,
		Clock:                 h.clock,
		Metrics:               o.metrics,
		Logger:                zaptest.NewLogger(h.t).Named(o.identity),
	}, o.grace, o.acceptFn))
	if err != nil {
		h.t.Fatal(err)
	}
	return h.run(le)
}

// run runs le, term after term, until the candidate is stopped or the test
// ends.
func (h *harness) run(le *LeaderElector) *candidate {
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{le: le, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			le.Run(ctx)
		}
	}()
	h.t.Cleanup(func() { cancel(); <-c.done })
	return c
}

// waitFor polls cond in real time; the fake clock does not move.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *harness) handover() lockmeta.Handover {
	h.t.Helper()
	var ho lockmeta.Handover
	if raw := annotationsOf(h.lockObject())[lockmeta.HandoverAnnotationKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &ho); err != nil {
			h.t.Fatal(err)
		}
	}
	return ho
}

// holderAlive writes a renewal for b, as a holder in another process would.
func (h *harness) renewAs(rec resourcelock.Record) {
	h.t.Helper()
	rec.RenewTime = metav1.NewTime(h.clock.Now())
	h.writeRecord(rec)
}

func TestWatchingFollowerMakesNoRequestsWhileHolderRenews(t *testing.T) {
	h := newHarness(t)
	holder := held("b", "", 4)
	h.writeRecord(holder)
	f := h.start(candidateOpts{identity: "a"})
	waitFor(t, "the follower to see b", func() bool { return f.le.GetLeader() == "b" && f.le.watch.Healthy() })
	h.client.ClearActions()
	for i := 0; i < 5; i++ {
		h.clock.Step(time.Second)
		h.renewAs(holder)
		// The next step of the fake clock waits for the follower to take
		// the renewal in, as a real one would long before the next renew:
		// a loaded machine must not make it judge by the one before.
		renewed := h.clock.Now().Truncate(time.Second)
		waitFor(t, "the follower to see the renewal", func() bool {
			rec, _ := f.le.Observed()
			return rec.RenewTime.Time.Equal(renewed)
		})
	}
	time.Sleep(50 * time.Millisecond) // let the follower react if it were going to
	// Only the holder's own get+update per renewal: the follower sent nothing.
	want := []string{}
	for i := 0; i < 5; i++ {
		want = append(want, "get configmaps", "update configmaps")
	}
	assertVerbs(t, h.verbs(), want...)
	if f.le.IsLeader() {
		t.Fatal("follower leads while the holder renews")
	}
}

func TestWatchingFollowerLearnsTheHolderFromTheListAndSendsNothing(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "", 4))
	h.client.ClearActions()
	f := h.start(candidateOpts{identity: "a"})
	waitFor(t, "the follower to know b", func() bool { return f.le.GetLeader() == "b" && f.le.watch.Healthy() })
	time.Sleep(50 * time.Millisecond) // let a first attempt go out if there were one
	// The shared watch's list told it everything: no get, create or update.
	assertVerbs(t, h.verbs())
	if f.le.IsLeader() {
		t.Fatal("the follower leads while b's lease runs")
	}
}

func TestWatchingFollowerTakesReleasedLockAtOnce(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "", 4))
	f := h.start(candidateOpts{identity: "a"})
	waitFor(t, "the follower to see b", func() bool { return f.le.GetLeader() == "b" && f.le.watch.Healthy() })
	h.client.ClearActions()
	h.writeRecord(resourcelock.Record{LeaseDurationSeconds: 1, LeaderTransitions: 2}) // b releases
	waitFor(t, "the follower to lead", f.le.IsLeader)
	got := h.verbs()
	// The release (get, update), then the follower's single write: no read.
	assertVerbs(t, got, "get configmaps", "update configmaps", "update configmaps")
	if rec := h.record(); rec.HolderIdentity != "a" || rec.LeaderTransitions != 3 {
		t.Fatalf("record = %+v", rec)
	}
}

func TestWatchingFollowerThatLosesTheRaceForAReleasedLockReadsNothing(t *testing.T) {
	h := newHarness(t)
	// Another follower, c, takes the released lock just before a's write
	// arrives: a's update conflicts. Installed before the clientset is used.
	var raced atomic.Bool
	h.client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		cm, ok := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap)
		if !ok || !strings.Contains(cm.Annotations[resourcelock.LeaderAnnotationKey], `"holderIdentity":"a"`) || raced.Swap(true) {
			return false, nil, nil
		}
		if err := takeAs(h, held("c", "", 4)); err != nil {
			return true, nil, err
		}
		return false, nil, nil // the version check below now reports the conflict
	})
	h.writeRecord(held("b", "", 4))
	f := h.start(candidateOpts{identity: "a"})
	waitFor(t, "the follower to see b", func() bool { return f.le.GetLeader() == "b" && f.le.watch.Healthy() })
	h.client.ClearActions()
	h.writeRecord(resourcelock.Record{LeaseDurationSeconds: 1, LeaderTransitions: 2}) // b releases
	waitFor(t, "the follower to learn of c from the watch", func() bool { return f.le.GetLeader() == "c" })
	time.Sleep(50 * time.Millisecond) // let the follower react if it were going to
	// The release (get, update), then a's one write, which lost: no read.
	assertVerbs(t, h.verbs(), "get configmaps", "update configmaps", "update configmaps")
	if !raced.Load() || f.le.IsLeader() {
		t.Fatalf("raced %v, follower leads %v: want a lost race", raced.Load(), f.le.IsLeader())
	}
	if err := f.le.LastError(); err != nil {
		t.Fatalf("LastError = %v after a lost race, want nil", err)
	}
}

// takeAs writes rec into the lock object directly in the clientset's store,
// as a write of another process that lands first, with a newer version.
func takeAs(h *harness, rec resourcelock.Record) error {
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	stored, err := h.client.Tracker().Get(gvr, ns, lockName)
	if err != nil {
		return err
	}
	cm := stored.(*corev1.ConfigMap).DeepCopy()
	rv, err := strconv.Atoi(cm.ResourceVersion)
	if err != nil {
		return err
	}
	cm.ResourceVersion = strconv.Itoa(rv + 500)
	cm.Annotations[resourcelock.LeaderAnnotationKey] = string(resourcelock.EncodeRecord(rec))
	return h.client.Tracker().Update(gvr, cm, ns)
}

func TestWatchingFollowerWakesExactlyAtExpiry(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "", 4))
	f := h.start(candidateOpts{identity: "a"})
	waitFor(t, "the follower to see b", func() bool { return f.le.GetLeader() == "b" && f.le.watch.Healthy() })
	h.client.ClearActions()
	waitFor(t, "the expiry timer", h.clock.HasWaiters)
	h.clock.Step(4 * time.Second) // exactly the lease: not yet expired
	time.Sleep(50 * time.Millisecond)
	if f.le.IsLeader() {
		t.Fatal("took the lock before it expired")
	}
	h.clock.Step(2 * time.Millisecond)
	waitFor(t, "the follower to lead", f.le.IsLeader)
	assertVerbs(t, h.verbs(), "update configmaps")
}

func TestCooperativeHandoverHasNoOverlap(t *testing.T) {
	h := newHarness(t)
	l := &ledger.Ledger{}
	holder := h.start(candidateOpts{identity: "h", key: "canary", accept: true, ledger: l})
	waitFor(t, "h to lead", holder.le.IsLeader)
	cand := h.start(candidateOpts{identity: "c", key: "stable", steal: true, ledger: l})
	waitFor(t, "c to lead", cand.le.IsLeader)
	if holder.le.IsLeader() {
		t.Fatal("h still leads after handing over")
	}
	rec := h.record()
	if rec.HolderIdentity != "c" || rec.HolderKey != "stable" || rec.LeaderTransitions != 1 {
		t.Fatalf("record after handover = %+v", rec)
	}
	if ho := h.handover(); ho.Holder != "c" || ho.Candidate != "" {
		t.Fatalf("handover annotation after handover = %+v", ho)
	}
	// IsLeader turns true just before the run function's goroutine starts.
	waitFor(t, "c's term in the ledger", func() bool { return l.Starts(lockName) == 2 })
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("run functions overlapped: %+v", o)
	}
}

func TestSilentCooperativeHolderIsPreemptedAfterGrace(t *testing.T) {
	h := newHarness(t)
	rec := held("ghost", "canary", 30)
	h.writeRecord(rec)
	// The annotation says ghost honours requests, but nothing answers.
	cm, _ := h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	cm.Annotations[lockmeta.HandoverAnnotationKey] = `{"holder":"ghost"}`
	if _, err := h.client.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := h.start(candidateOpts{identity: "c", key: "stable", steal: true, grace: 3 * time.Second})
	waitFor(t, "a handover request", func() bool { return h.handover().Candidate == "c" })
	if c.le.IsLeader() {
		t.Fatal("took the lock without waiting for the holder")
	}
	waitFor(t, "the grace timer", h.clock.HasWaiters)
	h.clock.Step(3*time.Second + 2*time.Millisecond)
	waitFor(t, "c to take the lock after the grace period", c.le.IsLeader)
	if got := h.record(); got.HolderIdentity != "c" || got.LeaderTransitions != 3 {
		t.Fatalf("record = %+v", got)
	}
}

func TestNonCooperativeHolderIsPreemptedAtOnce(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("istiod-a", "canary", 30)) // no handover annotation: istiod
	c := h.start(candidateOpts{identity: "c", key: "stable", steal: true})
	waitFor(t, "c to take the lock", c.le.IsLeader)
	if ho := h.handover(); ho.Candidate != "" {
		t.Fatalf("asked a holder that cannot answer: %+v", ho)
	}
}

func TestRefusedRequestIsAnsweredAndHolderKeepsLeading(t *testing.T) {
	h := newHarness(t)
	// The holder refuses as soon as it sees the request, so the request may
	// be gone before a poll of the object sees it: record it as it is written
	// (reactors must be added before the clientset is in use).
	var asked atomic.Bool
	h.client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if obj, ok := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap); ok &&
			strings.Contains(obj.Annotations[lockmeta.HandoverAnnotationKey], `"candidate":"c"`) {
			asked.Store(true)
		}
		return false, nil, nil
	})
	holder := h.start(candidateOpts{identity: "h", key: "stable", accept: false})
	waitFor(t, "h to lead", holder.le.IsLeader)
	c := h.start(candidateOpts{identity: "c", key: "canary", steal: true})
	waitFor(t, "c's request", asked.Load)
	waitFor(t, "the refusal", func() bool {
		ho := h.handover()
		return ho.Candidate == "c" && ho.Holder == "h" && ho.Answer == lockmeta.AnswerRefused
	})
	if !holder.le.IsLeader() || c.le.IsLeader() {
		t.Fatal("leadership moved although the holder refused")
	}
}

func TestDeletedLockIsRecreatedByWatchingFollower(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "", 30))
	f := h.start(candidateOpts{identity: "a"})
	waitFor(t, "the follower to see b", func() bool { return f.le.GetLeader() == "b" && f.le.watch.Healthy() })
	if err := h.client.CoreV1().ConfigMaps(ns).Delete(context.Background(), lockName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A deletion is not a release: b may still be working, so the follower
	// waits for b's lease as it saw it, then creates the lock.
	time.Sleep(50 * time.Millisecond)
	if f.le.IsLeader() {
		t.Fatal("took a deleted lock before its holder's lease ran out")
	}
	waitFor(t, "the expiry timer", h.clock.HasWaiters)
	h.clock.Step(30*time.Second + 2*time.Millisecond)
	waitFor(t, "the follower to lead", f.le.IsLeader)
	var cm *corev1.ConfigMap
	cm, _ = h.client.CoreV1().ConfigMaps(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	if cm == nil || h.record().HolderIdentity != "a" {
		t.Fatalf("lock not recreated by a: %+v", cm)
	}
}
