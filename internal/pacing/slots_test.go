package pacing

import (
	"fmt"
	"testing"
)

func granted(w *slotWaiter) bool {
	select {
	case <-w.granted:
		return true
	default:
		return false
	}
}

func TestSlotQueueServesLowestPriorityFirst(t *testing.T) {
	q := newSlotQueue(1)
	first := q.wait(9)
	if !granted(first) {
		t.Fatal("a free slot was not granted at once")
	}
	waiters := map[uint64]*slotWaiter{}
	for _, p := range []uint64{5, 1, 7, 3} {
		waiters[p] = q.wait(p)
	}
	var order []uint64
	for n := len(waiters); n > 0; n-- {
		q.release()
		for p, w := range waiters {
			if granted(w) {
				order = append(order, p)
				delete(waiters, p)
			}
		}
	}
	if got, want := fmt.Sprint(order), "[1 3 5 7]"; got != want {
		t.Fatalf("slots granted in order %v, want %v", got, want)
	}
}

func TestSlotQueueBoundsHoldersAndSurvivesLeaving(t *testing.T) {
	tests := []struct {
		name  string
		leave func(q *slotQueue, held, queued *slotWaiter)
		// wantFree: a new waiter is granted at once afterwards.
		wantFree bool
	}{
		{name: "a queued waiter leaves", leave: func(q *slotQueue, _, queued *slotWaiter) { q.leave(queued) }},
		{name: "a holder leaves", leave: func(q *slotQueue, held, _ *slotWaiter) { q.leave(held) }},
		{name: "both leave", leave: func(q *slotQueue, held, queued *slotWaiter) { q.leave(queued); q.leave(held) }, wantFree: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newSlotQueue(2)
			a, b := q.wait(2), q.wait(1)
			queued := q.wait(0)
			if !granted(a) || !granted(b) || granted(queued) {
				t.Fatalf("granted a=%v b=%v third=%v, want only the first two", granted(a), granted(b), granted(queued))
			}
			tc.leave(q, a, queued)
			next := q.wait(5)
			if granted(next) != tc.wantFree {
				t.Fatalf("a new waiter granted at once: %v, want %v", granted(next), tc.wantFree)
			}
			q.leave(next)
		})
	}
}

// Electors queue for a slot in an order that depends on their names (the
// identity and the lock): different names differ, the same name is stable.
func TestSlotOrderDiffersByName(t *testing.T) {
	a, b := slotOrder("a\x00ConfigMap istio-system/istio-leader"), slotOrder("b\x00ConfigMap istio-system/istio-leader")
	if a == b {
		t.Fatal("two identities share a slot order for the same lock")
	}
	if a != slotOrder("a\x00ConfigMap istio-system/istio-leader") {
		t.Fatal("the slot order of one name is not stable")
	}
}
