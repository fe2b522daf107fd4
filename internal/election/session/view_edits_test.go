package session

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// A foreign edit of a live session Lease that drops (or shortens) its
// leaseDurationSeconds, without touching renewTime, is no sign of life
// and no end either; yet the view takes the new lease for every token of
// the Lease, so the session of a live holder is judged dead at once, and
// a follower that tries before the next heartbeat takes its locks.
func TestViewForeignEditKeepsTheLease(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	v := newView(clk, "", "")
	v.setHealth(true)
	name := LeaseName("a", 2*time.Second)
	renew := clk.Now()
	v.observe(heartbeatLease(name, "tok", ptr.To("a"), ptr.To(int32(2)), renew), false)
	want := clk.Now().Add(2 * time.Second)
	clk.Step(100 * time.Millisecond)
	for _, seconds := range []*int32{nil, ptr.To(int32(0)), ptr.To(int32(-5))} {
		v.observe(heartbeatLease(name, "tok", ptr.To("a"), seconds, renew), false)
		if until, known := v.aliveUntil(Ref(name, "tok")); !known || until.Before(want) {
			t.Errorf("after an edit setting leaseDurationSeconds to %s the live session is alive until %v, want %v", show(seconds), until, want)
		}
	}
}

func show(p *int32) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// Every process that ever ran in the namespace leaves an entry in every
// other process's view: session Leases are named after identities, which
// are unique per process by default, and entries are never dropped, not
// even once the Lease is deleted and all its tokens are past their lease.
// A long-lived process in a namespace with pod churn grows without bound.
func TestViewForgetsDeletedSessions(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	v := newView(clk, "", "")
	v.setHealth(true)
	const n = 1000
	for i := range n {
		name := LeaseName(fmt.Sprintf("pod-%d", i), 2*time.Second)
		v.observe(heartbeatLease(name, "tok", ptr.To("p"), ptr.To(int32(2)), clk.Now()), false)
		v.observe(heartbeatLease(name, "tok", nil, ptr.To(int32(2)), clk.Now()), false) // graceful end
		v.observe(heartbeatLease(name, "tok", nil, ptr.To(int32(2)), clk.Now()), true)  // deleted
	}
	clk.Step(10 * time.Second)
	v.observe(heartbeatLease(LeaseName("live", 2*time.Second), "tok", ptr.To("p"), ptr.To(int32(2)), clk.Now()), false)
	v.mu.Lock()
	kept := len(v.leases)
	v.mu.Unlock()
	if kept > 1 {
		t.Errorf("the view keeps %d session Leases; %d of them were ended and deleted long ago", kept, n)
	}
}
