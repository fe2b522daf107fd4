package session

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func sessionLease(name, token, holder string, renew time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Annotations: map[string]string{TokenAnnotation: token}},
		Spec: coordinationv1.LeaseSpec{
			LeaseDurationSeconds: ptr.To(int32(4)),
			RenewTime:            &metav1.MicroTime{Time: renew},
		},
	}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

// The view may judge other sessions only while it has seen this process's
// own heartbeat sent within the margin: a watch that stalls shows none.
func TestViewIsCurrentOnlyWhileItSeesItsOwnHeartbeats(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	v := newView(clk)
	v.setHealth(true)
	const own, other, margin = LeasePrefix + "4s-me-x", LeasePrefix + "4s-other-y", 2 * time.Second

	if v.current(own, "t1", clk.Now(), margin) {
		t.Fatal("current before the own session was ever seen")
	}
	v.observe(sessionLease(own, "t1", "me", clk.Now()), false)
	v.observe(sessionLease(other, "t2", "other", clk.Now()), false)
	if !v.current(own, "t1", clk.Now(), margin) {
		t.Fatal("not current right after the own heartbeat was seen")
	}
	if v.current(own, "t0", clk.Now(), margin) {
		t.Fatal("current for a token of another incarnation")
	}
	until, known := v.aliveUntil(Ref(other, "t2"))
	if !known || !until.Equal(start.Add(4*time.Second)) {
		t.Fatalf("aliveUntil(other) = %v, %v; want a lease after it was seen", until, known)
	}

	// The watch stalls: nothing more arrives. Within the margin the view
	// still counts; past it, it cannot tell, although the other session's
	// lease as seen here has run out.
	clk.Step(margin)
	if !v.current(own, "t1", clk.Now(), margin) {
		t.Fatal("not current at the margin")
	}
	clk.Step(3 * time.Second)
	if v.current(own, "t1", clk.Now(), margin) {
		t.Fatal("current although the own heartbeat was last seen 5s ago")
	}

	// A heartbeat of this process sent now, seen through the watch, makes
	// it current again.
	v.observe(sessionLease(own, "t1", "me", clk.Now()), false)
	if !v.current(own, "t1", clk.Now(), margin) {
		t.Fatal("not current after a new own heartbeat was seen")
	}

	// The own session ended gracefully: nothing is current any more.
	v.observe(sessionLease(own, "t1", "", clk.Now()), false)
	if v.current(own, "t1", clk.Now(), margin) {
		t.Fatal("current after the own session ended")
	}
}
