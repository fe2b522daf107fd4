package elector

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/protocol/coordination"

	"go.uber.org/zap/zaptest"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// coordOpts describes one candidate of a coordinated Lease election.
type coordOpts struct {
	identity, key string
	successor     func() (string, string, bool)
	ledger        *ledger.Ledger
	poll          bool
	yield         func() time.Duration // racing candidates only
}

// startOnLease runs a candidate on the Lease lockName, coordinated unless
// o.yield is set.
func (h *harness) startOnLease(o coordOpts) *candidate {
	h.t.Helper()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, lockName, h.client, resourcelock.Config{Identity: o.identity, Key: o.key})
	if err != nil {
		h.t.Fatal(err)
	}
	work := waitDone
	if o.ledger != nil {
		work = noErr(o.ledger.Wrap(lockName, o.identity, func(ctx context.Context) { <-ctx.Done() }))
	}
	cfg := Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:       Callbacks{OnStartedLeading: work},
		ReleaseOnCancel: true,
		Watch:           !o.poll,
		Clock:           h.clock,
		Logger:          zaptest.NewLogger(h.t).Named(o.identity),
		YieldOnRelease:  o.yield,
	}
	if o.yield == nil {
		cfg.Coordination = coordination.New(coordination.Config{Successor: o.successor, LeaseDuration: cfg.LeaseDuration})
	}
	le, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.run(le)
}

// lease reads the Lease lockName.
func (h *harness) lease() *coordinationv1.Lease {
	h.t.Helper()
	l, err := h.client.CoordinationV1().Leases(ns).Get(context.Background(), lockName, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

// coordinate writes the Lease as a coordinator would: change is applied to
// the current object (created when missing).
func (h *harness) coordinate(change func(*coordinationv1.Lease)) {
	h.t.Helper()
	ctx := context.Background()
	leases := h.client.CoordinationV1().Leases(ns)
	l, err := leases.Get(ctx, lockName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns}}
		change(l)
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		return
	}
	if err != nil {
		h.t.Fatal(err)
	}
	change(l)
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// assign writes a full lease naming identity, as the coordinator does for
// a vacant lock.
func (h *harness) assign(identity, key string) { h.assignAt(identity, key, h.clock.Now()) }

// assignAt is assign by a coordinator whose wall clock reads now.
func (h *harness) assignAt(identity, key string, now time.Time) {
	h.coordinate(func(l *coordinationv1.Lease) {
		rec := resourcelock.LeaseToRecord(l)
		rec.HolderIdentity, rec.HolderKey, rec.LeaseDurationSeconds = identity, key, 4
		rec.AcquireTime, rec.RenewTime = metav1.NewTime(now), metav1.NewTime(now)
		rec.LeaderTransitions++
		resourcelock.ApplyRecordToLease(*rec, l)
		l.Spec.Strategy = ptr.To(coordinationv1.CoordinatedLeaseStrategy("meshd.io/prioritized"))
	})
}

func TestCoordinatedCandidateLeavesAVacantLockToTheCoordinator(t *testing.T) {
	h := newHarness(t)
	c := h.startOnLease(coordOpts{identity: "c1", key: "stable"})
	time.Sleep(50 * time.Millisecond)
	if _, err := h.client.CoordinationV1().Leases(ns).Get(context.Background(), lockName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a coordinated candidate created the lock by itself: %v", err)
	}
	h.assign("c1", "stable")
	waitFor(t, "c1 to lead once assigned", c.le.IsLeader)
	if got := *h.lease().Spec.Strategy; got != "meshd.io/prioritized" {
		t.Fatalf("the holder's renew dropped the strategy: %q", got)
	}
}

func TestCoordinatedCandidateTakesAVacantLockAfterItsPatience(t *testing.T) {
	h := newHarness(t)
	c := h.startOnLease(coordOpts{identity: "c1", key: "stable"})
	time.Sleep(50 * time.Millisecond)
	if c.le.IsLeader() {
		t.Fatal("led before the coordinator had a chance")
	}
	// No coordinator answers: after a lease the candidate takes it.
	h.stepUntil(6*time.Second, c.le.IsLeader)
	if !c.le.IsLeader() {
		t.Fatal("no leader a lease after the lock was seen vacant without a coordinator")
	}
}

func TestCoordinatedHolderHandsOverToThePreferredHolder(t *testing.T) {
	for _, poll := range []bool{false, true} {
		name := map[bool]string{false: "watching", true: "polling"}[poll]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			l := &ledger.Ledger{}
			h.assign("remote-1", "^stable")
			c1 := h.startOnLease(coordOpts{identity: "remote-1", key: "^stable", ledger: l, poll: poll})
			c2 := h.startOnLease(coordOpts{identity: "local-1", key: "stable", ledger: l})
			waitFor(t, "remote-1 to lead", c1.le.IsLeader)
			h.coordinate(func(l *coordinationv1.Lease) {
				l.Spec.PreferredHolder = ptr.To("local-1")
				l.Annotations[lockmeta.LeasePreferredHolderKeyAnnotation] = "stable"
			})
			if poll {
				h.stepUntil(200*time.Millisecond, c2.le.IsLeader)
			}
			waitFor(t, "local-1 to lead", c2.le.IsLeader)
			lease := h.lease()
			if lease.Spec.PreferredHolder != nil || lease.Annotations[lockmeta.LeasePreferredHolderKeyAnnotation] != "" {
				t.Fatalf("preferred holder left after it took over: %v", lease.Spec.PreferredHolder)
			}
			if got := lease.Annotations[resourcelock.LeaseHolderKeyAnnotation]; got != "stable" {
				t.Fatalf("holder key = %q, want stable", got)
			}
			if c1.le.IsLeader() {
				t.Fatal("remote-1 still leads")
			}
			if o := l.Overlaps(); len(o) != 0 {
				t.Fatalf("work overlapped: %+v", o)
			}
		})
	}
}

func TestCoordinatedHolderHandsToItsSuccessorOnStop(t *testing.T) {
	h := newHarness(t)
	h.assign("local-1", "stable")
	succ := func() (string, string, bool) { return "local-2", "stable", true }
	c1 := h.startOnLease(coordOpts{identity: "local-1", key: "stable", successor: succ})
	c2 := h.startOnLease(coordOpts{identity: "local-2", key: "stable"})
	waitFor(t, "local-1 to lead", c1.le.IsLeader)
	c1.stop()
	<-c1.done
	waitFor(t, "local-2 to lead", c2.le.IsLeader)
	if rec := resourcelock.LeaseToRecord(h.lease()); rec.LeaseDurationSeconds != 4 || rec.HolderIdentity != "local-2" {
		t.Fatalf("record after a directed handover = %+v", rec)
	}
}

func TestCoordinatedCandidateNeverTakesAHeldLock(t *testing.T) {
	h := newHarness(t)
	h.assign("holder", "canary")
	c := h.startOnLease(coordOpts{identity: "c1", key: "stable"})
	time.Sleep(50 * time.Millisecond)
	h.clock.Step(3 * time.Second) // the lease is still valid
	time.Sleep(50 * time.Millisecond)
	if c.le.IsLeader() || resourcelock.LeaseToRecord(h.lease()).HolderIdentity != "holder" {
		t.Fatal("a coordinated candidate took a held lock")
	}
}

func TestReleasedLockGoesToTheCandidateThatDoesNotYield(t *testing.T) {
	h := newHarness(t)
	var yielded atomic.Int32
	h.assign("old", "stable")
	lesser := h.startOnLease(coordOpts{identity: "remote-1", key: "^stable",
		yield: func() time.Duration { yielded.Add(1); return time.Hour }})
	best := h.startOnLease(coordOpts{identity: "local-1", key: "stable",
		yield: func() time.Duration { return 0 }})
	time.Sleep(50 * time.Millisecond)
	h.coordinate(func(l *coordinationv1.Lease) {
		rec := resourcelock.LeaseToRecord(l)
		rec.HolderIdentity, rec.HolderKey, rec.LeaseDurationSeconds = "", "", 1
		resourcelock.ApplyRecordToLease(*rec, l)
	})
	waitFor(t, "local-1 to lead", best.le.IsLeader)
	if lesser.le.IsLeader() || yielded.Load() == 0 {
		t.Fatalf("the lesser candidate did not yield (asked %d times)", yielded.Load())
	}
}

func TestCoordinationValidation(t *testing.T) {
	h := newHarness(t)
	cm, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{
		Name: lockName, Lock: cm,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:     Callbacks{OnStartedLeading: waitDone},
		KeyComparison: func(string) bool { return true },
		Coordination:  coordination.New(coordination.Config{Patience: -time.Second, LeaseDuration: 4 * time.Second}),
	})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"preferred holder", "KeyComparison", "Patience"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestCoordinatedCandidateDoesNotWriteAReleasedLock(t *testing.T) {
	h := newHarness(t)
	h.assign("old", "stable")
	h.coordinate(func(l *coordinationv1.Lease) {
		rec := resourcelock.LeaseToRecord(l)
		rec.HolderIdentity, rec.HolderKey, rec.LeaseDurationSeconds = "", "", 1
		resourcelock.ApplyRecordToLease(*rec, l)
	})
	h.client.ClearActions()
	c := h.startOnLease(coordOpts{identity: "c1", key: "stable"})
	time.Sleep(100 * time.Millisecond)
	for _, v := range kubetest.Verbs(h.client) {
		if strings.HasPrefix(v, "update") || strings.HasPrefix(v, "create") {
			t.Fatalf("a coordinated candidate wrote a released lock within its patience: %v", kubetest.Verbs(h.client))
		}
	}
	if c.le.IsLeader() {
		t.Fatal("led a released lock without being assigned it")
	}
}
