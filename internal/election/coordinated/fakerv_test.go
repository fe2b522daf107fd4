package coordinated

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestWithResourceVersions checks the test helper itself: a write from a
// stale copy conflicts.
func TestWithResourceVersions(t *testing.T) {
	c := fake.NewClientset()
	withResourceVersions(c)
	leases := c.CoordinationV1().Leases(testNS)
	ctx := context.Background()
	a, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if err != nil || a.ResourceVersion == "" {
		t.Fatalf("create: %v, resourceVersion %q", err, a.ResourceVersion)
	}
	b, err := leases.Update(ctx, a.DeepCopy(), metav1.UpdateOptions{})
	if err != nil || b.ResourceVersion == a.ResourceVersion {
		t.Fatalf("update: %v, resourceVersion %q after %q", err, b.ResourceVersion, a.ResourceVersion)
	}
	if _, err := leases.Update(ctx, a.DeepCopy(), metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want a conflict", err)
	}
}

// withResourceVersions makes the fake client assign resource versions and
// refuse a write whose resource version is not the stored one (optimistic
// concurrency as the API server does it), so that a write from a stale
// cache conflicts as it would in a cluster.
func withResourceVersions(client *fake.Clientset) {
	var mu sync.Mutex
	next := 100
	client.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		// CreateAction and UpdateAction have the same methods: tell them
		// apart by verb.
		a, ok := action.(k8stesting.UpdateAction)
		if !ok || (action.GetVerb() != "create" && action.GetVerb() != "update") {
			return false, nil, nil
		}
		obj := a.GetObject().(metav1.Object)
		if action.GetVerb() == "update" {
			stored, err := client.Tracker().Get(a.GetResource(), a.GetNamespace(), obj.GetName())
			if err == nil && obj.GetResourceVersion() != "" && stored.(metav1.Object).GetResourceVersion() != obj.GetResourceVersion() {
				return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), obj.GetName(), errors.New("stale resourceVersion"))
			}
		}
		mu.Lock()
		next++
		obj.SetResourceVersion(strconv.Itoa(next))
		mu.Unlock()
		return false, nil, nil
	})
}
