package session

import (
	"testing"
	"time"

	"go.uber.org/zap"
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
			// A Lease stores microseconds.
			RenewTime: &metav1.MicroTime{Time: renew.Truncate(time.Microsecond)},
		},
	}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

// The view may judge other sessions only while it has seen this process's
// own heartbeat, sent within the margin: a watch that stalls shows none.
func TestViewIsCurrentOnlyWhileItSeesItsOwnHeartbeats(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	const margin = 2 * time.Second
	h := newHeartbeat(Config{Identity: "me", LeaseDuration: 4 * time.Second, Clock: clk}, zap.NewNop())
	other := LeaseName("other", 4*time.Second)
	v := newView(clk)
	v.setHealth(true)
	beat := func() {
		sent := clk.Now()
		h.noteTry(sent)
		v.observe(sessionLease(h.name, h.token, "me", sent), false)
	}

	if current(v, h, clk.Now(), margin) {
		t.Fatal("current before the own session was ever seen")
	}
	beat()
	v.observe(sessionLease(other, "t2", "other", clk.Now()), false)
	if !current(v, h, clk.Now(), margin) {
		t.Fatal("not current right after the own heartbeat was seen")
	}
	until, known := v.aliveUntil(Ref(other, "t2"))
	if !known || !until.Equal(start.Add(4*time.Second)) {
		t.Fatalf("aliveUntil(other) = %v, %v; want a lease after it was seen", until, known)
	}

	// The watch stalls: nothing more arrives, though this process goes on
	// writing. Within the margin the view still counts; past it, it cannot
	// tell, although the other session's lease as seen here has run out.
	clk.Step(margin)
	h.noteTry(clk.Now())
	if !current(v, h, clk.Now(), margin) {
		t.Fatal("not current at the margin")
	}
	clk.Step(3 * time.Second)
	h.noteTry(clk.Now())
	if current(v, h, clk.Now(), margin) {
		t.Fatal("current although the own heartbeat seen was sent 5s ago")
	}

	// A heartbeat held in the network and stored late, seen now, counts
	// from when it was sent, not from when it was seen.
	v.observe(sessionLease(h.name, h.token, "me", start.Add(margin)), false)
	if current(v, h, clk.Now(), margin) {
		t.Fatal("current after seeing, late, a heartbeat sent 3s ago")
	}
	// One sent now and seen now makes it current again.
	beat()
	if !current(v, h, clk.Now(), margin) {
		t.Fatal("not current after a new own heartbeat was seen")
	}

	// The own Lease written by another incarnation (another token) and a
	// renewTime this process never wrote do not count.
	v.observe(sessionLease(h.name, "other-incarnation", "me", clk.Now()), false)
	if got, ok := v.ownRenew(h.name, "other-incarnation"); !ok || !got.Equal(clk.Now().Truncate(time.Microsecond)) {
		t.Fatalf("ownRenew of the other incarnation = %v, %v", got, ok)
	}
	if _, ok := h.sentAt(clk.Now().Add(time.Millisecond)); ok {
		t.Fatal("sentAt found a renewTime this process never wrote")
	}

	// The own session ended gracefully: nothing is current any more.
	v.observe(sessionLease(h.name, h.token, "", clk.Now()), false)
	if current(v, h, clk.Now(), margin) {
		t.Fatal("current after the own session ended")
	}
}

// sentAt remembers only the latest writes.
func TestHeartbeatRemembersTheLatestSendTimes(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := newHeartbeat(Config{Identity: "me", LeaseDuration: 4 * time.Second, Clock: clk}, zap.NewNop())
	first := clk.Now()
	for range maxTried + 1 {
		h.noteTry(clk.Now())
		clk.Step(time.Second)
	}
	if _, ok := h.sentAt(first); ok {
		t.Fatalf("the oldest of %d writes is still remembered", maxTried+1)
	}
	last := clk.Now().Add(-time.Second)
	if got, ok := h.sentAt(last); !ok || !got.Equal(last) {
		t.Fatalf("sentAt(latest) = %v, %v", got, ok)
	}
}
