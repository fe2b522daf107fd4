package lockstatus

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A lock whose mark names a live session shows that session and its renew
// time; a stale token, another holder's mark or an ended session do not
// count; session Leases are not elections.
func TestListShowsTheSessionThatRenewsAHolder(t *testing.T) {
	ns := "istio-system"
	renew := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	name := session.LeaseName("a", 30*time.Second)
	sess := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{session.Label: "true"},
			Annotations: map[string]string{session.TokenAnnotation: "t1"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To(int32(30)),
			RenewTime: &metav1.MicroTime{Time: renew.Add(time.Minute)}},
	}
	lock := func(lockName, holder, mark string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lockName, Namespace: ns,
			Annotations: map[string]string{lockmeta.SessionAnnotationKey: mark}}}
		resourcelock.ApplyRecordToLease(resourcelock.Record{HolderIdentity: holder, LeaseDurationSeconds: 30,
			RenewTime: metav1.NewTime(renew)}, l)
		return l
	}
	client := fake.NewClientset(sess,
		lock("live", "a", `{"holder":"a","session":"`+name+`/t1"}`),
		lock("stale-token", "a", `{"holder":"a","session":"`+name+`/t0"}`),
		lock("other-holder", "istiod", `{"holder":"a","session":"`+name+`/t1"}`),
		lock("garbage", "a", `{oops`),
	)
	locks, err := List(context.Background(), client, ns)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Lock{}
	for _, l := range locks {
		got[l.Election] = l
	}
	if _, ok := got[name]; ok || len(locks) != 4 {
		t.Errorf("listed %d locks including the session Lease: %v", len(locks), locks)
	}
	if l := got["live"]; l.Session != name || !l.SessionRenewTime.Equal(renew.Add(time.Minute)) || l.ExpiresIn(renew) != 90*time.Second {
		t.Errorf("live: session %q renewed %v, expires in %v", l.Session, l.SessionRenewTime, l.ExpiresIn(renew))
	}
	for _, n := range []string{"stale-token", "other-holder", "garbage"} {
		if l := got[n]; l.Session != "" || l.ExpiresIn(renew) != 30*time.Second {
			t.Errorf("%s: session %q, expires in %v; want none and the record's lease", n, l.Session, l.ExpiresIn(renew))
		}
	}
	// The session ends: its holders are no longer renewed by it.
	sess.Spec.HolderIdentity = nil
	if _, err := client.CoordinationV1().Leases(ns).Update(context.Background(), sess, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	locks, _ = List(context.Background(), client, ns)
	for _, l := range locks {
		if l.Session != "" {
			t.Errorf("%s still shows the ended session", l.Election)
		}
	}
}
