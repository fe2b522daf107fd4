package podexit

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/protocol"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const lockName = "istio-leader"

var _ protocol.HolderExit = (*Judge)(nil)

// follower is an elector that watches a lock held by holderMark's holder,
// with a Judge over a fake clientset and a fake clock that stands still
// unless the test steps it.
type follower struct {
	t      *testing.T
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	le     *elector.LeaderElector
	judge  *Judge
	cancel context.CancelFunc
	done   chan struct{}
}

func startFollower(t *testing.T, pod *corev1.Pod, mark *lockmeta.HolderPod) *follower {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0.Add(time.Hour))
	rec := resourcelock.Record{HolderIdentity: "meshd-0_ab", LeaseDurationSeconds: 30,
		AcquireTime: metav1.NewTime(clk.Now()), RenewTime: metav1.NewTime(clk.Now()), LeaderTransitions: 1}
	annotations := map[string]string{resourcelock.LeaderAnnotationKey: string(resourcelock.EncodeRecord(rec))}
	if mark != nil {
		raw, err := json.Marshal(mark)
		if err != nil {
			t.Fatal(err)
		}
		annotations[lockmeta.HolderPodAnnotationKey] = string(raw)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: lockName, Annotations: annotations}}
	client := kubetest.NewClientset(cm, pod)
	lock, err := resourcelock.NewConfigMapLock(client.CoreV1(), "istio-system", lockName, resourcelock.Config{Identity: "meshd-1_cd"})
	if err != nil {
		t.Fatal(err)
	}
	watches := NewWatches()
	judge := NewJudge(client, watches, lock, nil)
	le, err := elector.New(elector.Config{
		Name: lockName, Lock: lock, Watch: true, HolderExit: judge, Clock: clk,
		LeaseDuration: 30 * time.Second, RenewDeadline: 15 * time.Second, RetryPeriod: 7500 * time.Millisecond,
		Callbacks: elector.Callbacks{OnStartedLeading: func(ctx context.Context) error { <-ctx.Done(); return nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	judge.SetWake(le.Trigger)
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{t: t, client: client, clock: clk, le: le, judge: judge, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		le.Run(ctx)
	}()
	t.Cleanup(f.stop)
	waitFor(t, "the follower sees the holder", func() bool { return le.GetLeader() == "meshd-0_ab" })
	// Let the judge follow the Pod: its watch lists, and the elector has
	// asked about the holder at least once.
	waitFor(t, "the judge follows the holder's Pod", func() bool { return watches.Running() == 1 })
	return f
}

func (f *follower) stop() {
	f.cancel()
	<-f.done
	f.judge.Close()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// writePod applies a signal to the holder's Pod as the API server would
// show it: a status write, a delete, or a delete and a new Pod.
func (f *follower) writePod(pod *corev1.Pod) {
	f.t.Helper()
	ctx := context.Background()
	pods := f.client.CoreV1().Pods("istio-system")
	if pod == nil {
		if err := pods.Delete(ctx, "meshd-0", metav1.DeleteOptions{}); err != nil {
			f.t.Fatal(err)
		}
		return
	}
	cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if cur.UID != pod.UID {
		if err := pods.Delete(ctx, cur.Name, metav1.DeleteOptions{}); err != nil {
			f.t.Fatal(err)
		}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			f.t.Fatal(err)
		}
		return
	}
	pod.ResourceVersion = cur.ResourceVersion
	if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// Every signal of both lists, through a real elector: proof ends the lease
// at once (the fake clock never moves); anything else leaves the follower
// waiting until the lease has run out.
func TestFollowerTakesOverOnlyOnProof(t *testing.T) {
	for _, c := range proofCases() {
		if c.name == "pod of another name" {
			continue // the watch of the holder's Pod never delivers it
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case has a clientset and a clock of its own
			mark := holderMark()
			f := startFollower(t, runningPod(), &mark)
			f.writePod(c.pod())
			if c.proof {
				waitFor(t, "the follower leads", f.le.IsLeader)
				return
			}
			time.Sleep(200 * time.Millisecond)
			if f.le.IsLeader() {
				t.Fatal("the follower took over without proof")
			}
			f.clock.Step(30*time.Second + 10*time.Millisecond)
			waitFor(t, "the follower leads once the lease ran out", f.le.IsLeader)
		})
	}
}

// A holder that published no mark (istiod, or a holder that has not yet
// seen its own run), or a mark left by another holder, is waited for.
func TestFollowerWaitsWithoutTheHoldersMark(t *testing.T) {
	dead := runningPod()
	meshdStatus(dead).State = corev1.ContainerState{Terminated: terminated(t0.Add(10 * time.Second))}
	other := holderMark()
	other.Holder = "istiod-7"
	for name, mark := range map[string]*lockmeta.HolderPod{"none": nil, "another holder's": &other} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := startFollowerNoWatch(t, dead, mark)
			time.Sleep(200 * time.Millisecond)
			if f.le.IsLeader() {
				t.Fatal("the follower took over without the holder's mark")
			}
			f.clock.Step(30*time.Second + 10*time.Millisecond)
			waitFor(t, "the follower leads once the lease ran out", f.le.IsLeader)
		})
	}
}

// startFollowerNoWatch is startFollower for a lock without a usable mark:
// the judge never follows a Pod.
func startFollowerNoWatch(t *testing.T, pod *corev1.Pod, mark *lockmeta.HolderPod) *follower {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0.Add(time.Hour))
	rec := resourcelock.Record{HolderIdentity: "meshd-0_ab", LeaseDurationSeconds: 30,
		AcquireTime: metav1.NewTime(clk.Now()), RenewTime: metav1.NewTime(clk.Now()), LeaderTransitions: 1}
	annotations := map[string]string{resourcelock.LeaderAnnotationKey: string(resourcelock.EncodeRecord(rec))}
	if mark != nil {
		raw, _ := json.Marshal(mark)
		annotations[lockmeta.HolderPodAnnotationKey] = string(raw)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: lockName, Annotations: annotations}}
	client := kubetest.NewClientset(cm, pod)
	lock, err := resourcelock.NewConfigMapLock(client.CoreV1(), "istio-system", lockName, resourcelock.Config{Identity: "meshd-1_cd"})
	if err != nil {
		t.Fatal(err)
	}
	watches := NewWatches()
	judge := NewJudge(client, watches, lock, nil)
	le, err := elector.New(elector.Config{
		Name: lockName, Lock: lock, Watch: true, HolderExit: judge, Clock: clk,
		LeaseDuration: 30 * time.Second, RenewDeadline: 15 * time.Second, RetryPeriod: 7500 * time.Millisecond,
		Callbacks: elector.Callbacks{OnStartedLeading: func(ctx context.Context) error { <-ctx.Done(); return nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	judge.SetWake(le.Trigger)
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{t: t, client: client, clock: clk, le: le, judge: judge, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		le.Run(ctx)
	}()
	t.Cleanup(f.stop)
	waitFor(t, "the follower sees the holder", func() bool { return le.GetLeader() == "meshd-0_ab" })
	if n := watches.Running(); n != 0 {
		t.Errorf("the judge follows %d Pods without a mark of the holder", n)
	}
	return f
}

// The holder publishes its run only once its own Pod's status shows it,
// and withdraws the mark for good when a later run is reported while it
// lives; it is told of each change, once.
func TestPublisherPublishesOnlyItsOwnRun(t *testing.T) {
	stale := runningPod()
	meshdStatus(stale).RestartCount = 1
	meshdStatus(stale).State.Running.StartedAt = metav1.NewTime(t0.Add(-5 * time.Second))
	client := kubetest.NewClientset(stale)
	watches := NewWatches()
	p, err := NewPublisher(client, watches, Identity{Namespace: "istio-system", Pod: "meshd-0", UID: "uid-1", Container: "meshd", ProcessStart: alive}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var changes atomic.Int32
	stop := p.Start(func() { changes.Add(1) })
	defer stop()
	waitFor(t, "the watch lists", func() bool { return watches.Running() == 1 })
	time.Sleep(100 * time.Millisecond)
	if m, ok := p.Mark(); ok {
		t.Fatalf("published a stale run: %+v", m)
	}
	pods := client.CoreV1().Pods("istio-system")
	write := func(pod *corev1.Pod) {
		cur, err := pods.Get(context.Background(), "meshd-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.ResourceVersion = cur.ResourceVersion
		if _, err := pods.UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	write(runningPod())
	waitFor(t, "the mark of this run", func() bool { m, ok := p.Mark(); return ok && m.RestartCount == 2 })
	if n := changes.Load(); n != 1 {
		t.Errorf("told of %d changes when the mark was found, want 1", n)
	}

	later := runningPod()
	meshdStatus(later).RestartCount = 3
	write(later)
	waitFor(t, "the mark withdrawn", func() bool { _, ok := p.Mark(); return !ok })
	write(runningPod())
	time.Sleep(50 * time.Millisecond)
	if _, ok := p.Mark(); ok {
		t.Error("a withdrawn mark came back")
	}
	if n := changes.Load(); n != 2 {
		t.Errorf("told of %d changes after the mark was found and withdrawn, want 2", n)
	}
}

// Judges and publishers of one Watches share one watch per Pod, and the
// watch stops with its last user.
func TestWatchesShareOneWatchPerPod(t *testing.T) {
	client := kubetest.NewClientset(runningPod())
	w := NewWatches()
	var mu sync.Mutex
	seen := 0
	subs := []*Subscription{
		w.Subscribe(client, "istio-system", "meshd-0", func(*corev1.Pod) { mu.Lock(); seen++; mu.Unlock() }),
		w.Subscribe(client, "istio-system", "meshd-0", nil),
		w.Subscribe(client, "istio-system", "meshd-1", nil),
	}
	if n := w.Running(); n != 2 {
		t.Fatalf("%d watches for two Pods", n)
	}
	waitFor(t, "the Pod delivered", func() bool { return subs[1].Pod() != nil })
	if subs[2].Pod() != nil {
		t.Error("a missing Pod was delivered")
	}
	if p := subs[1].Pod(); len(p.Status.ContainerStatuses) != 2 {
		t.Errorf("status not kept: %+v", p.Status)
	}
	for _, s := range subs {
		s.Close()
		s.Close()
	}
	if n := w.Running(); n != 0 {
		t.Errorf("%d watches after the last user left", n)
	}
}
