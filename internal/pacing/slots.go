package pacing

import (
	"container/heap"
	"sync"
)

// slotQueue is a counting semaphore whose waiters are served lowest
// priority value first, not in the order they came. The first attempts of a
// process wait in one, each with a priority derived from its candidate and
// lock (see slotOrder), so that processes starting the same elections at
// the same time work through a backlog in different orders: each then
// mostly creates lock objects that the others have not created yet, and
// learns of the rest from its watch, instead of all of them racing to
// create the same object, which all but one lose.
//
// A slotQueue is safe for concurrent use.
type slotQueue struct {
	mu      sync.Mutex
	free    int
	seq     uint64
	waiters slotHeap
}

// slotWaiter is one place in a slotQueue. Its granted channel is closed
// once it holds a slot.
type slotWaiter struct {
	prio, seq uint64
	index     int // in the heap; -1 once granted or removed
	granted   chan struct{}
}

// newSlotQueue returns a queue of n slots.
func newSlotQueue(n int) *slotQueue { return &slotQueue{free: n} }

// wait joins the queue with priority prio. The slot is granted at once when
// one is free and nobody waits.
func (q *slotQueue) wait(prio uint64) *slotWaiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := &slotWaiter{prio: prio, seq: q.seq, index: -1, granted: make(chan struct{})}
	q.seq++
	if q.free > 0 && len(q.waiters) == 0 {
		q.free--
		close(w.granted)
		return w
	}
	heap.Push(&q.waiters, w)
	return w
}

// leave gives w's place up: a waiter still queued leaves the queue; a slot
// already granted is released.
func (q *slotQueue) leave(w *slotWaiter) {
	q.mu.Lock()
	if w.index >= 0 {
		heap.Remove(&q.waiters, w.index)
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	q.release()
}

// release gives a slot back, to the waiter with the lowest priority value
// (the earliest among equals) if there is one.
func (q *slotQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 {
		q.free++
		return
	}
	close(heap.Pop(&q.waiters).(*slotWaiter).granted)
}

// slotHeap is a min-heap of waiters by priority, then arrival.
type slotHeap []*slotWaiter

func (h slotHeap) Len() int { return len(h) }

func (h slotHeap) Less(i, j int) bool {
	if h[i].prio != h[j].prio {
		return h[i].prio < h[j].prio
	}
	return h[i].seq < h[j].seq
}

func (h slotHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *slotHeap) Push(x any) {
	w := x.(*slotWaiter)
	w.index = len(*h)
	*h = append(*h, w)
}

func (h *slotHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}
