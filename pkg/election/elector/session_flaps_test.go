package elector

import (
	"context"
	"testing"
	"time"
)

// The epoch rule does not make a session holder
// write forever. A write while the watch is broken records no epoch, and
// so does a flap since the last write: the next renew writes, once; the
// renew after it is left to the session again.
func TestSessionHolderReturnsToItsSessionAfterFlaps(t *testing.T) {
	h := newLeaseHarness(t)
	s := &fakeSession{ref: "s/1", sent: t0, current: true, known: true}
	le := h.sessionElector("a", s)
	le.watch.MarkHealthy(false)
	mustAttempt(t, le, false, acquired) // written while the watch is broken
	le.loop.lastRenew = t0
	h.verbs()
	renew := func(want ...string) {
		t.Helper()
		h.clock.Step(time.Second)
		s.sent = h.clock.Now()
		if end := le.renewOnce(context.Background()); end != nil {
			t.Fatalf("renew ended the term: %+v", end)
		}
		assertVerbs(t, h.verbs(), want...)
	}
	renew("update leases") // still broken: writes
	le.watch.MarkHealthy(true)
	renew("update leases") // healthy, but not since the last write
	renew()                // left to the session
	for i := 0; i < 3; i++ {
		le.watch.MarkHealthy(false)
		le.watch.MarkHealthy(true)
		renew("update leases")
		renew()
	}
}
