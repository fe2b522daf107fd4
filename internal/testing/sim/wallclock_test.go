package sim

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/meshd-io/meshd/internal/testing/monotime"
)

// carriesMonotonic reports whether t carries a monotonic reading: Round(0)
// strips it and leaves everything else.
func carriesMonotonic(t time.Time) bool { return t != t.Round(0) }

// TestAStepMovesTheWallReadingAndNotTheDurations: an actor's clock shows a
// step in its wall reading (what it writes, what comparisons with stored
// times see) and not in the durations it measures between its own
// readings, as a real process's time.Now does.
func TestAStepMovesTheWallReadingAndNotTheDurations(t *testing.T) {
	clk := newSimClock(epoch)
	st := newActorState("a", clk)
	c := newActorClock(clk, st)
	before := c.Now()
	if !before.Round(0).Equal(epoch) || !carriesMonotonic(before) {
		t.Fatalf("Now() = %v, want %v with a monotonic reading", before, epoch)
	}
	clk.Step(time.Second)
	st.stepWall(-4 * time.Second)
	after := c.Now()
	if got := after.Sub(before); got != time.Second {
		t.Fatalf("across a step back of 4s the actor measures %v, want the 1s that passed", got)
	}
	if !after.After(before) {
		t.Fatal("a later reading is not after the earlier one")
	}
	if got := after.Round(0).Sub(before.Round(0)); got != -3*time.Second {
		t.Fatalf("the wall readings differ by %v, want -3s", got)
	}
	if got := c.Since(before); got != time.Second {
		t.Fatalf("Since = %v, want 1s", got)
	}
	// A stored time (no monotonic reading) compares by the wall clock.
	stored := before.Round(0)
	if !after.Before(stored) {
		t.Fatalf("the actor reads a time stored 3s ahead of its wall clock (%v) as past (now %v)", stored, after)
	}
}

// TestTheAPIStoresTheWallReadingAndEveryoneReadsIt: what an actor writes
// is stored without the monotonic reading, with its wall clock's time, and
// every actor (the writer too) reads it as stored, by get, list and watch.
func TestTheAPIStoresTheWallReadingAndEveryoneReadsIt(t *testing.T) {
	api, a, ca := newTestAPI()
	b := newActorState("b", api.clock)
	cb := newActorClient(api, b)
	ctx := context.Background()
	w, err := cb.CoordinationV1().Leases(Namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	a.stepWall(5 * time.Second)
	b.stepWall(-2 * time.Second)
	now := newActorClock(api.clock, a).Now()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LockName, Namespace: Namespace},
		Spec: coordinationv1.LeaseSpec{AcquireTime: &metav1.MicroTime{Time: now}, RenewTime: &metav1.MicroTime{Time: now}}}
	mine, err := ca.CoordinationV1().Leases(Namespace).Create(ctx, l, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !carriesMonotonic(l.Spec.RenewTime.Time) {
		t.Fatal("the caller's object lost its monotonic reading: the client changed it")
	}
	want := epoch.Add(5 * time.Second)
	check := func(who string, got *coordinationv1.Lease) {
		t.Helper()
		for _, tm := range []time.Time{got.Spec.AcquireTime.Time, got.Spec.RenewTime.Time} {
			if tm != want {
				t.Fatalf("%s reads %v, want %v exactly, without a monotonic reading", who, tm, want)
			}
		}
	}
	check("the writer's create", mine)
	check("the store", api.getLock(leases, LockName).(*coordinationv1.Lease))
	got, err := cb.CoordinationV1().Leases(Namespace).Get(ctx, LockName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("another actor's get", got)
	list, err := ca.CoordinationV1().Leases(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v, %d items", err, len(list.Items))
	}
	check("the writer's list", &list.Items[0])
	api.deliver(func() {})
	ev := <-w.ResultChan()
	if ev.Type != watch.Added {
		t.Fatalf("watch delivered %s, want ADDED", ev.Type)
	}
	check("another actor's watch", ev.Object.(*coordinationv1.Lease))
}

// TestStripMonotonicKeepsTheRest: stripping reaches the times inside
// pointers and leaves the other fields and a nil object alone.
func TestStripMonotonicKeepsTheRest(t *testing.T) {
	now := monotime.WithMonotonic(epoch, time.Minute)
	holder := "a"
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{"k": "v"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &metav1.MicroTime{Time: now}}}
	stripMonotonic(l)
	if carriesMonotonic(l.Spec.RenewTime.Time) || !l.Spec.RenewTime.Time.Equal(epoch) {
		t.Fatalf("renewTime %v, want %v without a monotonic reading", l.Spec.RenewTime.Time, epoch)
	}
	if *l.Spec.HolderIdentity != "a" || l.Annotations["k"] != "v" || l.Name != "x" {
		t.Fatalf("stripping changed other fields: %+v", l)
	}
	var nilLease *coordinationv1.Lease
	stripMonotonic(nilLease)
}
