package coordinated

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRosterSharedAndReleased(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	rosters := NewRosters()
	a, releaseA, err := rosters.Acquire(client, testNS, clk)
	if err != nil {
		t.Fatal(err)
	}
	b, releaseB, err := rosters.Acquire(client, testNS, clk)
	if err != nil {
		t.Fatal(err)
	}
	other, releaseOther, err := rosters.Acquire(client, "elsewhere", clk)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a == other {
		t.Fatal("rosters not shared per (client, namespace, clock)")
	}
	releaseA()
	releaseA() // a second call is a no-op
	eventually(t, "the roster syncs", b.HasSynced)
	releaseB()
	releaseOther()
	if got := rosters.Running(); got != 0 {
		t.Fatalf("%d rosters run after every release", got)
	}
	c, releaseC, err := rosters.Acquire(client, testNS, clk)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseC()
	if c == a {
		t.Fatal("a released roster was handed out again")
	}
	// goleak (TestMain) checks that the released rosters stopped.
}

// TestTwoRostersNeverShare: the same client, namespace and clock acquired
// through two Rosters (two independent worlds in one process) give two
// Rosters, and releasing one leaves the other running.
func TestTwoRostersNeverShare(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	one, two := NewRosters(), NewRosters()
	a, releaseA, err := one.Acquire(client, testNS, clk)
	if err != nil {
		t.Fatal(err)
	}
	b, releaseB, err := two.Acquire(client, testNS, clk)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseB()
	if a == b {
		t.Fatal("two Rosters handed out one Roster")
	}
	releaseA()
	if one.Running() != 0 || two.Running() != 1 {
		t.Fatalf("running %d and %d after releasing the first, want 0 and 1", one.Running(), two.Running())
	}
	eventually(t, "the second roster syncs", b.HasSynced)
}

func TestRostersAcquireRejectsBadInput(t *testing.T) {
	if _, _, err := NewRosters().Acquire(nil, testNS, nil); err == nil {
		t.Fatal("nil client accepted")
	}
	if _, _, err := NewRosters().Acquire(fake.NewClientset(), "", nil); err == nil {
		t.Fatal("empty namespace accepted")
	}
	var unbuilt *Rosters
	if _, _, err := unbuilt.Acquire(fake.NewClientset(), testNS, nil); err == nil {
		t.Fatal("a nil Rosters acquired a roster")
	}
}

func TestRosterCandidatesAndSubscribe(t *testing.T) {
	sl := cand{name: "stable-local", key: "stable", preempts: true, renew: t0}
	cn := cand{name: "canary", key: "canary", preempts: false, renew: t0, version: "1.1.0"}
	dead := cand{name: "dead", key: "stable", renew: t0.Add(-time.Hour)}
	otherLease := cand{name: "x", key: "stable", renew: t0}
	ol := otherLease.object()
	ol.Spec.LeaseName = "another"
	client := fake.NewClientset(sl.object(), cn.object(), dead.object(), ol)
	r, release, err := NewRosters().Acquire(client, testNS, clocktesting.NewFakeClock(t0))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	eventually(t, "the roster syncs", r.HasSynced)

	all := r.Candidates(testLease)
	if len(all) != 3 || all[0].Name != "canary" || all[1].Name != "dead" || all[2].Name != "stable-local" {
		t.Fatalf("candidates %+v", all)
	}
	c := all[0]
	if c.Identity != "id-canary" || c.Key != "canary" || c.Preempts || c.BinaryVersion != "1.1.0" ||
		c.LeaseDuration != leaseDur || !c.Live || !c.RenewTime.Equal(t0) || all[1].Live {
		t.Fatalf("candidate %+v", c)
	}
	if got := r.Ranked(testLease, "canary"); len(got) != 2 || got[0] != (Member{"canary", "canary"}) || got[1] != (Member{"stable-local", "stable"}) {
		t.Fatalf("ranked %+v", got)
	}

	var calls, allCalls atomic.Int32
	var deletes atomic.Int32
	unsubscribe := r.Subscribe("canary", func(lc *coordinationv1beta1.LeaseCandidate) {
		if lc == nil {
			deletes.Add(1)
		} else if lc.Spec.PingTime != nil {
			calls.Add(1)
		}
	})
	unsubscribeAll := r.SubscribeAll(func(lease string) {
		if lease == testLease {
			allCalls.Add(1)
		}
	})
	lcs := client.CoordinationV1beta1().LeaseCandidates(testNS)
	obj, _ := lcs.Get(context.Background(), "canary", metav1.GetOptions{})
	obj.Spec.PingTime = &metav1.MicroTime{Time: t0}
	if _, err := lcs.Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the subscribers are told", func() bool { return calls.Load() == 1 && allCalls.Load() == 1 })
	if err := lcs.Delete(context.Background(), "canary", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delete is told", func() bool { return deletes.Load() == 1 && allCalls.Load() == 2 })
	unsubscribe()
	unsubscribeAll()
	if _, err := lcs.Create(context.Background(), cn.object(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new object reaches the roster", func() bool { _, ok := r.Get("canary"); return ok })
	if calls.Load() != 1 || allCalls.Load() != 2 || deletes.Load() != 1 {
		t.Fatal("called after unsubscribing")
	}
}
