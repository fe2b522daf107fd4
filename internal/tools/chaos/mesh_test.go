package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/controllers/rootcert"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func testMesh(client *fake.Clientset) *mesh {
	revs := []string{"stable", "canary"}
	return &mesh{client: client, namespace: "mesh", apps: []string{"app"}, revisions: revs, locks: daemonLocks(revs)}
}

func TestSetUpSeedsAndCheckDataFindsLosses(t *testing.T) {
	client := fake.NewClientset()
	m := testMesh(client)
	ctx := context.Background()
	if err := m.setUp(ctx); err != nil {
		t.Fatal(err)
	}
	// What meshd would add: records, the source certificate, its copies.
	for _, l := range m.locks {
		if err := m.rewrite(ctx, l, func(r *resourcelock.Record) { r.HolderIdentity, r.LeaseDurationSeconds = "stable-1", 4 }, nil); err != nil {
			t.Fatalf("rewrite %s: %v", l.name, err)
		}
	}
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: rootcert.DefaultSourceConfigMap, Namespace: "mesh"},
		Data: map[string]string{rootcert.DefaultSourceKey: "CERT"}}
	if _, err := client.CoreV1().ConfigMaps("mesh").Create(ctx, src, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	target, _ := client.CoreV1().ConfigMaps("app").Get(ctx, rootcert.TargetConfigMap, metav1.GetOptions{})
	target.Data[rootcert.TargetKey] = "CERT"
	if _, err := client.CoreV1().ConfigMaps("app").Update(ctx, target, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if lost, err := m.checkData(ctx); err != nil || len(lost) != 0 {
		t.Fatalf("checkData after a clean run = %q, %v", lost, err)
	}
	rec, err := m.record(ctx, m.locks[1])
	if err != nil || rec.HolderIdentity != "stable-1" {
		t.Fatalf("record = %+v, %v", rec, err)
	}

	// Now lose things: a lock's label, a data key of the root certificate
	// copy, and leave the ConfigMap lock's record corrupt.
	lease, _ := client.CoordinationV1().Leases("mesh").Get(ctx, m.locks[1].name, metav1.GetOptions{})
	delete(lease.Labels, keepKey)
	if _, err := client.CoordinationV1().Leases("mesh").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	target, _ = client.CoreV1().ConfigMaps("app").Get(ctx, rootcert.TargetConfigMap, metav1.GetOptions{})
	delete(target.Data, keepDataKey)
	target.Data[rootcert.TargetKey] = "OLD"
	if _, err := client.CoreV1().ConfigMaps("app").Update(ctx, target, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.corrupt(ctx, m.locks[0], "garbage"); err != nil {
		t.Fatal(err)
	}
	lost, err := m.checkData(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(lost, "\n")
	for _, want := range []string{"meshd-status-leader: label", "app/istio-ca-root-cert: data key", "not the source certificate", "record left corrupt"} {
		if !strings.Contains(all, want) {
			t.Errorf("checkData lacks %q:\n%s", want, all)
		}
	}
}

// TestSeedLockRacesWithMeshd: the lock is recreated by meshd between the
// read that found it missing and the create.
func TestSeedLockRacesWithMeshd(t *testing.T) {
	client := fake.NewClientset()
	m := testMesh(client)
	l := m.locks[1] // a Lease
	raced := false
	client.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if raced {
			return false, nil, nil
		}
		raced = true
		// meshd's create lands first.
		holder := "stable-1"
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: "mesh"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
		if err := client.Tracker().Create(a.GetResource(), lease, "mesh"); err != nil {
			t.Error(err)
		}
		return true, nil, apierrors.NewAlreadyExists(a.GetResource().GroupResource(), l.name)
	})
	if err := m.seedLock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	lease, err := client.CoordinationV1().Leases("mesh").Get(context.Background(), l.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Labels[keepKey] != keepValue || *lease.Spec.HolderIdentity != "stable-1" {
		t.Fatalf("after the race: labels %v, holder %v", lease.Labels, *lease.Spec.HolderIdentity)
	}
}

// TestDeleteLeaseAndAwaitItsReturn: delete-session deletes a session Lease
// and fails unless the session creates it again in time.
func TestDeleteLeaseAndAwaitItsReturn(t *testing.T) {
	client := fake.NewClientset()
	m := testMesh(client)
	ctx := context.Background()
	const name = "meshd-session-4s-stable-1-abc"
	leases := client.CoordinationV1().Leases("mesh")
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mesh"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.deleteLease(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after deleteLease: %v, want not found", err)
	}
	if err := m.deleteLease(ctx, name); err != nil {
		t.Fatalf("deleting a Lease that is gone: %v", err)
	}
	if err := m.awaitLease(ctx, name, 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "not created again") {
		t.Fatalf("awaitLease of a Lease nobody creates = %v", err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mesh"}}, metav1.CreateOptions{})
	}()
	if err := m.awaitLease(ctx, name, 5*time.Second); err != nil {
		t.Fatalf("awaitLease of a Lease created again: %v", err)
	}
}

// TestRewriteSetsExtraAnnotations: bogus-holder can leave a session mark
// next to the record it writes, keeping every other annotation.
func TestRewriteSetsExtraAnnotations(t *testing.T) {
	client := fake.NewClientset()
	m := testMesh(client)
	ctx := context.Background()
	if err := m.setUp(ctx); err != nil {
		t.Fatal(err)
	}
	l := m.locks[1] // a Lease
	mark := `{"holder":"intruder-2","session":"meshd-session-4s-intruder-2-x/bogus"}`
	if err := m.rewrite(ctx, l, func(r *resourcelock.Record) { r.HolderIdentity = "intruder-2" },
		map[string]string{lockmeta.SessionAnnotationKey: mark}); err != nil {
		t.Fatal(err)
	}
	lease, err := client.CoordinationV1().Leases("mesh").Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lease.Annotations[lockmeta.SessionAnnotationKey]; got != mark {
		t.Errorf("session mark %q, want %q", got, mark)
	}
	if lease.Annotations[keepKey] != keepValue || *lease.Spec.HolderIdentity != "intruder-2" {
		t.Errorf("after rewrite: annotations %v, holder %v", lease.Annotations, *lease.Spec.HolderIdentity)
	}
}
