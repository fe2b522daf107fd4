package lockstatus

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func TestListReadsBothLockKinds(t *testing.T) {
	renew := time.Date(2026, 1, 2, 3, 4, 20, 0, time.UTC)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "istio-gateway-deployment-canary", Namespace: "istio-system"}}
	resourcelock.ApplyRecordToLease(resourcelock.Record{HolderIdentity: "b", HolderKey: "canary", LeaseDurationSeconds: 30,
		RenewTime: metav1.NewTime(renew), LeaderTransitions: 1}, lease)
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "istio-leader", Namespace: "istio-system", Annotations: map[string]string{
			resourcelock.LeaderAnnotationKey: `{"holderIdentity":"istiod-a","holderKey":"^stable","leaseDurationSeconds":30,"acquireTime":"2026-01-02T03:04:05Z","renewTime":"2026-01-02T03:04:20Z","leaderTransitions":3}`,
		}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: "istio-system", Annotations: map[string]string{
			resourcelock.LeaderAnnotationKey: `{oops`,
		}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-a-lock", Namespace: "istio-system"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "other", Annotations: map[string]string{
			resourcelock.LeaderAnnotationKey: `{}`,
		}}},
		lease,
	)
	locks, err := List(context.Background(), client, "istio-system")
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 3 {
		t.Fatalf("got %d locks, want 3: %+v", len(locks), locks)
	}
	broken, cm, ls := locks[0], locks[1], locks[2]
	if broken.Election != "broken" || broken.Error == "" || broken.Held() {
		t.Fatalf("broken lock = %+v", broken)
	}
	if cm.Election != "istio-leader" || cm.Kind != election.ConfigMapLock || cm.Holder != "istiod-a" || cm.Revision != "stable" ||
		!cm.Remote || cm.Transitions != 3 || cm.LeaseDuration != 30*time.Second || !cm.RenewTime.Equal(renew) {
		t.Fatalf("ConfigMap lock = %+v", cm)
	}
	if got := cm.ExpiresIn(renew.Add(10 * time.Second)); got != 20*time.Second {
		t.Fatalf("ExpiresIn = %v, want 20s", got)
	}
	if ls.Kind != election.LeaseLock || ls.Holder != "b" || ls.Revision != "canary" || ls.Remote || ls.Transitions != 1 {
		t.Fatalf("Lease lock = %+v", ls)
	}
}
