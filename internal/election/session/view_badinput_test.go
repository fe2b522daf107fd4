package session

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// heartbeatLease is a session Lease as a heartbeat writes it.
func heartbeatLease(name, token string, holder *string, seconds *int32, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels: map[string]string{Label: "true"}, Annotations: map[string]string{TokenAnnotation: token}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: holder, LeaseDurationSeconds: seconds,
			RenewTime: &metav1.MicroTime{Time: renew}},
	}
}

// Bad input never makes a session look alive, never panics, and a
// restarted process's token is judged apart from the old one.
func TestViewBadInputAndRestart(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	v := newView(clk, "", "")
	name := LeaseName("a", 2*time.Second)
	if _, known := v.aliveUntil(Ref(name, "t1")); known {
		t.Fatal("known before the watch listed")
	}
	v.setHealth(true)
	// A session not seen yet may have been renewed just before the list:
	// it counts as renewed then, for the lease its name states.
	for _, ref := range []string{Ref(name, "unknown"), Ref("meshd-session-2s-ghost", "t1")} {
		if until, known := v.aliveUntil(ref); !known || !until.Equal(clk.Now().Add(2*time.Second)) {
			t.Errorf("aliveUntil(%q) just after the list = %v, %v; want alive for a lease, known", ref, until, known)
		}
	}
	clk.Step(2 * time.Second)
	for _, ref := range []string{"", "/", "x/", "/y", "no-slash", Ref(name, "unknown"), Ref("meshd-session-2s-ghost", "t1"), Ref("meshd-session-xs-a", "t1")} {
		if until, known := v.aliveUntil(ref); !known || !until.IsZero() {
			t.Errorf("aliveUntil(%q) = %v, %v; want not alive, known", ref, until, known)
		}
	}
	// Objects that are not session Leases, or carry no token, are ignored.
	v.observe(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: LeasePrefix + "cm"}}, false)
	v.observe(heartbeatLease("other", "t1", ptr.To("a"), ptr.To(int32(2)), clk.Now()), false)
	v.observe(heartbeatLease(name, "", ptr.To("a"), ptr.To(int32(2)), clk.Now()), false)
	v.observe("garbage", false)
	v.observe(cache.DeletedFinalStateUnknown{Key: "ns/" + name, Obj: "garbage"}, false)
	if until, _ := v.aliveUntil(Ref("other", "t1")); !until.IsZero() {
		t.Errorf("a Lease without the session prefix counts as a session until %v", until)
	}
	if until, _ := v.aliveUntil(Ref(name, "")); !until.IsZero() {
		t.Errorf("an empty token counts as alive until %v", until)
	}

	// The old process renews, then a restarted one (new token) takes over
	// the Lease: the old token is alive only until a lease after its last
	// renewal seen here, however often the new one renews.
	v.observe(heartbeatLease(name, "old", ptr.To("a"), ptr.To(int32(2)), clk.Now()), false)
	lastOld := clk.Now()
	for i := range 8 {
		clk.Step(500 * time.Millisecond)
		v.observe(heartbeatLease(name, "new", ptr.To("a"), ptr.To(int32(2)), clk.Now().Add(time.Duration(i))), false)
	}
	if until, known := v.aliveUntil(Ref(name, "old")); !known || !until.Equal(lastOld.Add(2*time.Second)) {
		t.Errorf("old token alive until %v (known %v); want %v", until, known, lastOld.Add(2*time.Second))
	}
	if until, _ := v.aliveUntil(Ref(name, "new")); !until.Equal(clk.Now().Add(2 * time.Second)) {
		t.Errorf("new token alive until %v; want %v", until, clk.Now().Add(2*time.Second))
	}
	// A deletion is not an end; an update that changes nothing is no sign
	// of life.
	v.observe(heartbeatLease(name, "new", ptr.To("a"), ptr.To(int32(2)), clk.Now().Add(7)), true)
	v.observe(cache.DeletedFinalStateUnknown{Key: "ns/" + name, Obj: heartbeatLease(name, "new", nil, ptr.To(int32(2)), clk.Now())}, true)
	seen := clk.Now()
	clk.Step(time.Second)
	v.observe(heartbeatLease(name, "new", ptr.To("a"), ptr.To(int32(2)), seen.Add(7)), false)
	if until, _ := v.aliveUntil(Ref(name, "new")); !until.Equal(seen.Add(2 * time.Second)) {
		t.Errorf("after a deletion and an unchanged update the new token is alive until %v; want %v", until, seen.Add(2*time.Second))
	}
	// The graceful end (no holder) ends the token at once.
	v.observe(heartbeatLease(name, "new", nil, ptr.To(int32(2)), clk.Now()), false)
	if until, known := v.aliveUntil(Ref(name, "new")); !known || !until.IsZero() {
		t.Errorf("after the graceful end the token is alive until %v (known %v)", until, known)
	}
	// A broken watch knows nothing.
	v.setHealth(false)
	if _, known := v.aliveUntil(Ref(name, "old")); known {
		t.Error("known while the watch is broken")
	}
}
