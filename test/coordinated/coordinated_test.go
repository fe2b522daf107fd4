package coordinated

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

const leaseName = "istio-leader"

// leaseDuration is long enough that nobody needs to renew the Lease while
// a test runs: these tests check the coordinator's decisions, not a holder.
const leaseDuration = 30 * time.Second

// background runs functions returning an error until stop.
type background struct {
	t      *testing.T
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newBackground(t *testing.T) *background {
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{t: t, ctx: ctx, cancel: cancel}
	t.Cleanup(b.stop)
	return b
}

// start runs f; cancel stops only it and waits for it.
func (b *background) start(name string, f func(context.Context) error) (cancel func()) {
	ctx, stopOne := context.WithCancel(b.ctx)
	done := make(chan struct{})
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer close(done)
		if err := f(ctx); err != nil {
			b.t.Errorf("%s: %v", name, err)
		}
	}()
	return func() { stopOne(); <-done }
}

func (b *background) stop() { b.cancel(); b.wg.Wait() }

func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestSupported(t *testing.T) {
	ok, err := coordinated.Supported(cluster.Client.Discovery())
	if err != nil || !ok {
		t.Fatalf("Supported = %v, %v on a server with the feature on", ok, err)
	}
}

func TestPrioritizedStrategy(t *testing.T) {
	ns := cluster.NewNamespace(t)
	client := cluster.Client
	roster, release, err := coordinated.NewRosters().Acquire(client, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	bg := newBackground(t)

	names := map[string]string{}
	cancels := map[string]func(){}
	for _, inst := range []struct{ identity, key string }{
		{"stable-local-1", "stable"}, {"stable-remote-1", "^stable"}, {"canary-local-1", "canary"},
	} {
		p, err := coordinated.NewPublisher(client, roster, coordinated.CandidateSpec{
			Namespace: ns, LeaseName: leaseName, Identity: inst.identity, Key: inst.key,
			Preempts: true, LeaseDuration: leaseDuration, BinaryVersion: "1.36.0",
		}, zaptest.NewLogger(t).Named(inst.identity), nil)
		if err != nil {
			t.Fatal(err)
		}
		names[inst.identity] = p.Spec().Name
		cancels[inst.identity] = bg.start(inst.identity, p.Run)
	}

	var mu sync.Mutex
	defaultRevision := "stable"
	decisions := map[coordinated.Decision]int{}
	coord, err := coordinated.NewCoordinator(client, coordinated.CoordinatorConfig{
		Namespace: ns, Logger: zaptest.NewLogger(t).Named("coordinator"),
		Default: func() string { mu.Lock(); defer mu.Unlock(); return defaultRevision },
		Metrics: func(_ string, d coordinated.Decision) { mu.Lock(); defer mu.Unlock(); decisions[d]++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	bg.start("coordinator", coord.Run)

	leases := client.CoordinationV1().Leases(ns)
	lease := func() (*coordinationv1.Lease, error) {
		return leases.Get(context.Background(), leaseName, metav1.GetOptions{})
	}
	waitFor(t, "the stable local candidate to hold the lease", func() (bool, error) {
		l, err := lease()
		return err == nil && ptr.Deref(l.Spec.HolderIdentity, "") == names["stable-local-1"], nil
	})
	l, _ := lease()
	if ptr.Deref(l.Spec.Strategy, "") != coordinated.Strategy || l.Annotations[resourcelock.LeaseHolderKeyAnnotation] != "stable" ||
		ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != int32(leaseDuration/time.Second) {
		t.Fatalf("lease %+v %+v", l.Annotations, l.Spec)
	}
	checkCandidates(t, ns, names)

	mu.Lock()
	defaultRevision = "canary"
	mu.Unlock()
	coord.Trigger()
	waitFor(t, "canary to be the preferred holder", func() (bool, error) {
		l, err := lease()
		return err == nil && ptr.Deref(l.Spec.PreferredHolder, "") == names["canary-local-1"], nil
	})
	l, _ = lease()
	if ptr.Deref(l.Spec.HolderIdentity, "") != names["stable-local-1"] || l.Annotations[coordinated.PreferredHolderKeyAnnotation] != "canary" {
		t.Fatalf("after the flip: %+v %+v", l.Annotations, l.Spec)
	}

	// The preferred candidate leaves: the preference goes with it.
	cancels["canary-local-1"]()
	waitFor(t, "the preference to be cleared", func() (bool, error) {
		l, err := lease()
		return err == nil && l.Spec.PreferredHolder == nil, nil
	})
	// Metrics are counted once a write has returned, so the count may trail
	// what a read of the Lease shows by a moment.
	counted := func() map[coordinated.Decision]int {
		mu.Lock()
		defer mu.Unlock()
		return map[coordinated.Decision]int{
			coordinated.DecisionAssign: decisions[coordinated.DecisionAssign],
			coordinated.DecisionPrefer: decisions[coordinated.DecisionPrefer],
			coordinated.DecisionClear:  decisions[coordinated.DecisionClear],
		}
	}
	waitFor(t, "three decisions to be counted", func() (bool, error) {
		c := counted()
		return c[coordinated.DecisionAssign]+c[coordinated.DecisionPrefer]+c[coordinated.DecisionClear] >= 3, nil
	})
	if got := counted(); got[coordinated.DecisionAssign] != 1 || got[coordinated.DecisionPrefer] != 1 || got[coordinated.DecisionClear] != 1 {
		t.Fatalf("decisions %v, want one assign, one prefer, one clear", got)
	}

	bg.stop()
	list, err := client.CoordinationV1beta1().LeaseCandidates(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("candidates left after a graceful stop: %d, %v", len(list.Items), err)
	}
}

// checkCandidates checks that the API server stored every candidate with
// the mesh strategy.
func checkCandidates(t *testing.T, ns string, names map[string]string) {
	t.Helper()
	for identity, name := range names {
		lc, err := cluster.Client.CoordinationV1beta1().LeaseCandidates(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("candidate of %s: %v", identity, err)
		}
		if lc.Spec.Strategy != coordinated.Strategy || lc.Spec.LeaseName != leaseName ||
			lc.Annotations[coordinated.IdentityAnnotation] != identity || lc.Spec.RenewTime == nil {
			t.Fatalf("candidate of %s: %+v %+v", identity, lc.Annotations, lc.Spec)
		}
	}
}

// TestPingSkipsTheSilent publishes candidates whose renewTime soon grows
// older than their lease (a long heartbeat), beside the object of a
// candidate whose process is gone. The coordinator must ping both, get the
// live one's answer, give up on the silent one after AckTimeout although it
// ranks first, and assign the live one.
func TestPingSkipsTheSilent(t *testing.T) {
	ns := cluster.NewNamespace(t)
	client := cluster.Client
	roster, release, err := coordinated.NewRosters().Acquire(client, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	bg := newBackground(t)
	const lease = 1 * time.Second
	p, err := coordinated.NewPublisher(client, roster, coordinated.CandidateSpec{
		Namespace: ns, LeaseName: leaseName, Identity: "stable-local-1", Key: "stable",
		Preempts: true, LeaseDuration: lease, Heartbeat: 30 * time.Second, BinaryVersion: "1.36.0",
	}, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	bg.start("publisher", p.Run)

	// The silent candidate ranks first: same key, older binary version.
	silentName := coordinated.CandidateName(leaseName, "stable-local-0")
	silent := &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: silentName, Namespace: ns, Annotations: map[string]string{
			coordinated.IdentityAnnotation: "stable-local-0", coordinated.HolderKeyAnnotation: "stable",
			coordinated.PreemptsAnnotation: "true", coordinated.LeaseDurationAnnotation: "1",
			coordinated.HeartbeatAnnotation: "30",
		}},
		Spec: coordinationv1beta1.LeaseCandidateSpec{
			LeaseName: leaseName, Strategy: coordinated.Strategy, BinaryVersion: "1.0.0", EmulationVersion: "1.0.0",
			RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	}
	lcs := client.CoordinationV1beta1().LeaseCandidates(ns)
	if _, err := lcs.Create(context.Background(), silent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both candidates to be older than their lease", func() (bool, error) {
		return roster.HasSynced() && len(roster.Ranked(leaseName, "stable")) == 2, nil
	})
	time.Sleep(lease + 200*time.Millisecond)
	if got := roster.Ranked(leaseName, "stable"); got[0].Name != silentName {
		t.Fatalf("ranking %v: the silent candidate should rank first", got)
	}

	coord, err := coordinated.NewCoordinator(client, coordinated.CoordinatorConfig{
		Namespace: ns, Default: func() string { return "stable" }, AckTimeout: 500 * time.Millisecond,
		Logger: zaptest.NewLogger(t).Named("coordinator"),
	})
	if err != nil {
		t.Fatal(err)
	}
	bg.start("coordinator", coord.Run)
	waitFor(t, "the live candidate to hold the lease", func() (bool, error) {
		l, err := client.CoordinationV1().Leases(ns).Get(context.Background(), leaseName, metav1.GetOptions{})
		return err == nil && ptr.Deref(l.Spec.HolderIdentity, "") == p.Spec().Name, nil
	})
	got, err := lcs.Get(context.Background(), silentName, metav1.GetOptions{})
	if err != nil || got.Spec.PingTime == nil || !got.Spec.RenewTime.Before(got.Spec.PingTime) {
		t.Fatalf("the silent candidate was not pinged: %+v, %v", got.Spec, err)
	}
	live, err := lcs.Get(context.Background(), p.Spec().Name, metav1.GetOptions{})
	if err != nil || live.Spec.PingTime == nil || live.Spec.RenewTime.Before(live.Spec.PingTime) {
		t.Fatalf("the live candidate was not pinged or did not answer: %+v, %v", live.Spec, err)
	}
}
