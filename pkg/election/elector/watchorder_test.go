package elector

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A watch that hands over a renewal and then a re-creation of the lock
// object without a record, before the loop takes either, must leave the
// follower with the renewed lease. Before, the loop took only the newest
// object: the renewal was lost, and the follower took the empty object one
// lease after the older renewal while the holder still worked (classic
// simulation seed 992459, named scenario seed-992459).
func TestWatchDeliveriesAreIngestedInOrder(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	w := newLockWatch(le, le.cfg.Lock.(lockcap.Watchable))

	h.writeRecord(held("b", "", 4))
	w.Deliver(h.lockObject(), false)
	w.ingest()

	h.clock.Step(3 * time.Second)
	renewed := held("b", "", 4)
	renewed.RenewTime = metav1.NewTime(h.clock.Now())
	h.writeRecord(renewed)
	w.Deliver(h.lockObject(), false)
	empty := h.lockObject()
	delete(annotationsOf(empty), resourcelock.LeaderAnnotationKey)
	h.updateLock(empty)
	w.Deliver(h.lockObject(), false)
	if !w.ingest() {
		t.Fatal("ingest found nothing new")
	}

	h.clock.Step(2 * time.Second) // 5 s after the first record, 2 s after the renewal
	if !le.holderMayBeWorking(h.clock.Now()) {
		t.Fatalf("the holder's lease counts from its older record (lease end %v, now %v)", le.leaseEnd(), h.clock.Now())
	}
	if got, want := le.leaseEnd(), t0.Add(3*time.Second+4*time.Second); !got.Equal(want) {
		t.Fatalf("lease end = %v, want %v (the renewal seen plus its lease)", got, want)
	}
}

// Deliveries past the bound are dropped; the lease of the holder then
// counts from the ingest, never from an older observation.
func TestWatchOverflowTakesTheLeaseAsRenewed(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	w := newLockWatch(le, le.cfg.Lock.(lockcap.Watchable))
	h.writeRecord(held("b", "", 4))
	w.Deliver(h.lockObject(), false)
	w.ingest()
	h.clock.Step(3 * time.Second)
	empty := h.lockObject()
	delete(annotationsOf(empty), resourcelock.LeaderAnnotationKey)
	for range lockwatch.MaxPending + 1 {
		w.Deliver(empty.DeepCopyObject(), false)
	}
	w.ingest()
	if got, want := le.leaseEnd(), h.clock.Now().Add(4*time.Second); !got.Equal(want) {
		t.Fatalf("lease end after an overflow = %v, want %v", got, want)
	}
}

// A watch that breaks wakes the loop, so that a follower asleep until the
// lease end it computed polls from then on instead.
func TestBrokenWatchWakesTheLoop(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	w := newLockWatch(le, le.cfg.Lock.(lockcap.Watchable))
	w.SetHealth(true)
	select {
	case <-w.Events():
		t.Fatal("a healthy watch woke the loop")
	default:
	}
	w.SetHealth(false)
	select {
	case <-w.Events():
	default:
		t.Fatal("a broken watch did not wake the loop")
	}
}
