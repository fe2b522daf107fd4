package session

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// nameLease reads the lease a session Lease's name states, which LeaseName
// writes as whole milliseconds, cut down, when it is not whole seconds
// ("1500ms" for 1.5005s). A follower counts a session it never saw as
// renewed at the heal for that lease, so it must never be shorter than the
// session's: rounded up to whole seconds, as the Lease itself keeps it.
func TestNameLeaseIsNeverShorterThanTheSessionLease(t *testing.T) {
	for _, d := range []time.Duration{
		time.Second,
		1500 * time.Millisecond,
		1500*time.Millisecond + 500*time.Microsecond,
		30*time.Second + time.Nanosecond,
	} {
		for _, id := range []string{"a", "istiod-7d9f-x2", "My_Host.Name-1", ""} {
			name := LeaseName(id, d)
			got, ok := nameLease(name)
			if !ok {
				t.Errorf("nameLease(%q) not understood (lease %v, identity %q)", name, d, id)
				continue
			}
			if got < d {
				t.Errorf("nameLease(%q) = %v, shorter than the session's lease %v", name, got, d)
			}
		}
	}
}

// The same, at the view: a token never seen, whose session's lease is
// 1.0005s, counts as alive for 1s after the heal only.
func TestUnseenTokenAliveForTheWholeSessionLease(t *testing.T) {
	d := time.Second + 500*time.Microsecond
	name := LeaseName("b", d)
	clk := clocktesting.NewFakeClock(t0)
	v := newView(clk, "", "")
	v.setHealth(true)
	clk.Step(time.Second + 100*time.Microsecond) // still within the session's lease from the heal
	if until, known := v.aliveUntil(Ref(name, "unseen")); !known || until.Before(t0.Add(d)) {
		t.Errorf("a session never seen counts as alive until %v (known %v), before a lease of %v from the heal (%v)", until, known, d, t0.Add(d))
	}
}
