package coordinated

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// coordinatorRig runs a Coordinator on a fake client and records its
// decisions.
type coordinatorRig struct {
	t      *testing.T
	client *fake.Clientset
	clk    *clocktesting.FakeClock
	coord  *Coordinator

	mu        sync.Mutex
	def       string
	decisions []string
	stop      func()
}

func newRig(t *testing.T, def string, objs ...runtime.Object) *coordinatorRig {
	r := &coordinatorRig{t: t, client: fake.NewClientset(objs...), clk: clocktesting.NewFakeClock(t0), def: def}
	withResourceVersions(r.client)
	coord, err := NewCoordinator(r.client, CoordinatorConfig{
		Namespace: testNS, Clock: r.clk, Logger: zaptest.NewLogger(t),
		Default: func() string { r.mu.Lock(); defer r.mu.Unlock(); return r.def },
		Metrics: func(lease string, d Decision) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.decisions = append(r.decisions, lease+":"+string(d))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.coord = coord
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- coord.Run(ctx) }()
	r.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(r.stop)
	return r
}

func (r *coordinatorRig) setDefault(def string) {
	r.mu.Lock()
	r.def = def
	r.mu.Unlock()
	r.coord.Trigger()
}

func (r *coordinatorRig) lease() *coordinationv1.Lease {
	l, err := r.client.CoordinationV1().Leases(testNS).Get(context.Background(), testLease, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return l
}

func (r *coordinatorRig) decided() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.decisions, ",")
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

func TestCoordinatorAssignPreferClear(t *testing.T) {
	sl := cand{name: "stable-local", key: "stable", preempts: true, renew: t0}
	sr := cand{name: "stable-remote", key: "^stable", preempts: true, renew: t0}
	cn := cand{name: "canary", key: "canary", preempts: true, renew: t0}
	r := newRig(t, "stable", sl.object(), sr.object(), cn.object())

	eventually(t, "the lease is assigned", func() bool { return holderOf(r.lease()) == "stable-local" })
	l := r.lease()
	if ptr.Deref(l.Spec.Strategy, "") != Strategy || l.Annotations[resourcelock.LeaseHolderKeyAnnotation] != "stable" ||
		ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 10 || ptr.Deref(l.Spec.LeaseTransitions, -1) != 0 ||
		!l.Spec.RenewTime.Time.Equal(t0) || !l.Spec.AcquireTime.Time.Equal(t0) || l.Spec.PreferredHolder != nil {
		t.Fatalf("assigned lease %+v", l.Spec)
	}

	r.setDefault("canary")
	eventually(t, "canary is preferred", func() bool { return ptr.Deref(r.lease().Spec.PreferredHolder, "") == "canary" })
	if got := r.lease().Annotations[PreferredHolderKeyAnnotation]; got != "canary" {
		t.Fatalf("preferred holder key %q", got)
	}
	if holderOf(r.lease()) != "stable-local" {
		t.Fatal("the coordinator replaced a valid holder")
	}

	r.setDefault("stable")
	eventually(t, "the preference is cleared", func() bool { return r.lease().Spec.PreferredHolder == nil })
	if _, ok := r.lease().Annotations[PreferredHolderKeyAnnotation]; ok {
		t.Fatal("preferred holder key left behind")
	}
	// A decision is counted once its write has returned: wait for the last.
	want := "istio-leader:assign,istio-leader:prefer,istio-leader:clear"
	eventually(t, "three decisions counted", func() bool { return strings.Count(r.decided(), ",") >= 2 })
	if got := r.decided(); got != want {
		t.Fatalf("decisions %s, want %s", got, want)
	}
}

func TestCoordinatorWaitsOutAStaleLease(t *testing.T) {
	// The holder's record is old by its own times, but this coordinator has
	// just seen it: it waits a full lease before calling it expired.
	old := heldLease("gone", "canary", t0.Add(-time.Hour))
	sl := cand{name: "stable-local", key: "stable", preempts: true, renew: t0.Add(5 * time.Second)}
	r := newRig(t, "stable", old, sl.object())
	eventually(t, "the expiry timer", r.clk.HasWaiters)
	if h := holderOf(r.lease()); h != "gone" {
		t.Fatalf("holder %q before the lease expired by local observation", h)
	}
	r.clk.Step(leaseDur + time.Millisecond)
	eventually(t, "the expired lease is assigned", func() bool { return holderOf(r.lease()) == "stable-local" })
	l := r.lease()
	if l.Annotations["example.com/foreign"] != "kept" || l.Annotations[resourcelock.LeaseHolderKeyAnnotation] != "stable" ||
		ptr.Deref(l.Spec.LeaseTransitions, 0) != 5 || ptr.Deref(l.Spec.Strategy, "") != Strategy {
		t.Fatalf("reassigned lease %+v %+v", l.Annotations, l.Spec)
	}
}

func TestCoordinatorSkipsSilentCandidate(t *testing.T) {
	silent := cand{name: "stable-local", key: "stable", preempts: true, renew: t0.Add(-leaseDur - time.Second)}
	cn := cand{name: "canary", key: "canary", preempts: true, renew: t0}
	r := newRig(t, "stable", silent.object(), cn.object())
	eventually(t, "the stale best candidate is pinged", func() bool {
		lc, err := r.client.CoordinationV1beta1().LeaseCandidates(testNS).Get(context.Background(), "stable-local", metav1.GetOptions{})
		return err == nil && lc.Spec.PingTime != nil && lc.Spec.PingTime.Time.Equal(t0)
	})
	eventually(t, "the ack timer", r.clk.HasWaiters)
	if l := r.lease(); l != nil {
		t.Fatalf("lease written before the ping timed out: %+v", l.Spec)
	}
	r.clk.Step(DefaultAckTimeout)
	eventually(t, "the next candidate is assigned", func() bool { return holderOf(r.lease()) == "canary" })
}

func TestCoordinatorAssignsPingedCandidateThatAnswers(t *testing.T) {
	slow := cand{name: "stable-local", key: "stable", preempts: true, renew: t0.Add(-leaseDur - time.Second)}
	cn := cand{name: "canary", key: "canary", preempts: true, renew: t0}
	r := newRig(t, "stable", slow.object(), cn.object())
	lcs := r.client.CoordinationV1beta1().LeaseCandidates(testNS)
	eventually(t, "the ping", func() bool {
		lc, err := lcs.Get(context.Background(), "stable-local", metav1.GetOptions{})
		return err == nil && lc.Spec.PingTime != nil
	})
	lc, _ := lcs.Get(context.Background(), "stable-local", metav1.GetOptions{})
	lc.Spec.RenewTime = lc.Spec.PingTime.DeepCopy()
	if _, err := lcs.Update(context.Background(), lc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the answering candidate is assigned", func() bool { return holderOf(r.lease()) == "stable-local" })
}

func TestCoordinatorLeavesForeignLeasesAlone(t *testing.T) {
	other := cand{name: "kcm-1", key: "", renew: t0, strategy: coordinationv1.OldestEmulationVersion}
	held := heldLease("someone", "", t0)
	held.Name = "other-lease"
	r := newRig(t, "stable", other.object(), held)
	// Give it a moment of real time to act wrongly, then check it did not.
	eventually(t, "the coordinator to list", func() bool {
		lists := 0
		for _, a := range r.client.Actions() {
			if a.GetVerb() == "list" {
				lists++
			}
		}
		return lists >= 2
	})
	time.Sleep(100 * time.Millisecond)
	if l := r.lease(); l != nil {
		t.Fatalf("lease of another strategy written: %+v", l.Spec)
	}
	for _, a := range r.client.Actions() {
		if v := a.GetVerb(); v == "create" || v == "update" {
			t.Fatalf("unexpected write %s %s", v, a.GetResource().Resource)
		}
	}
}

func TestNewCoordinatorValidates(t *testing.T) {
	if _, err := NewCoordinator(nil, CoordinatorConfig{AckTimeout: -1}); err == nil ||
		!strings.Contains(err.Error(), "client") || !strings.Contains(err.Error(), "Namespace") || !strings.Contains(err.Error(), "AckTimeout") {
		t.Fatalf("error %v", err)
	}
}

func TestCoordinatorKeepsADeletedLeaseForItsHolder(t *testing.T) {
	// The holder works; its Lease is deleted (kubectl replace --force, a
	// GitOps tool). That is not a release: the coordinator assigns nobody
	// while the holder's lease runs by its own observation.
	held := heldLease("stable-remote", "^stable", t0)
	sl := cand{name: "stable-local", key: "stable", preempts: false, renew: t0.Add(leaseDur)}
	r := newRig(t, "stable", held, sl.object())
	eventually(t, "the expiry timer", r.clk.HasWaiters)
	leases := r.client.CoordinationV1().Leases(testNS)
	if err := leases.Delete(context.Background(), held.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if l := r.lease(); l != nil {
		t.Fatalf("the coordinator re-created the Lease of a holder that may still work: %+v", l.Spec)
	}
	r.clk.Step(leaseDur + time.Millisecond)
	eventually(t, "the lease assigned once the holder's lease ran out", func() bool { return holderOf(r.lease()) == "stable-local" })
}
