package resourcelock

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

func TestOnOwnStackReturnsTheRequestsResults(t *testing.T) {
	defer goleak.VerifyNone(t)
	v, err := onOwnStack(func() (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("got %v, %v; want 7, nil", v, err)
	}
	errBoom := errors.New("boom")
	if _, err := onOwnStack(func() (int, error) { return 0, errBoom }); !errors.Is(err, errBoom) {
		t.Fatalf("got error %v, want %v", err, errBoom)
	}
}

func TestOnOwnStackRaisesTheRequestsPanicInTheCaller(t *testing.T) {
	defer goleak.VerifyNone(t)
	defer func() {
		if r := recover(); r != "bad request" {
			t.Fatalf("recovered %v, want the request's panic", r)
		}
	}()
	_, _ = onOwnStack(func() (int, error) { panic("bad request") })
	t.Fatal("onOwnStack returned after a panic")
}

// A lock's requests go through the clientset as before, and are over once
// the lock's call has returned.
func TestLockRequestsRunToCompletionBeforeReturning(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset()
	var inFlight int
	client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		inFlight++
		time.Sleep(time.Millisecond)
		inFlight--
		return false, nil, nil
	})
	lock := newLeaseLocks(t, client, "ns", 1)[0]
	ctx := context.Background()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	if err := lock.Create(ctx, Record{HolderIdentity: "me", LeaseDurationSeconds: 10, AcquireTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	if inFlight != 0 {
		t.Fatal("Create returned while its request was in flight")
	}
	if err := lock.Update(ctx, Record{HolderIdentity: "me", LeaseDurationSeconds: 10, AcquireTime: now, RenewTime: now, LeaderTransitions: 1}); err != nil {
		t.Fatal(err)
	}
	rec, _, err := lock.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if inFlight != 0 || rec.LeaderTransitions != 1 {
		t.Fatalf("after Get: %d requests in flight, record %+v", inFlight, rec)
	}
	if got := kubetest.CountVerbs(client, "leases"); got["create"] != 1 || got["update"] != 1 || got["get"] != 1 {
		t.Fatalf("requests %v, want one create, update and get", got)
	}
}

func TestHubDeliversObjectsWithoutManagedFields(t *testing.T) {
	defer goleak.VerifyNone(t)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock-0", Namespace: "ns", ResourceVersion: "3",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "other", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	client := fake.NewClientset(lease)
	lock := newLeaseLocks(t, client, "ns", 1)[0]
	got := make(chan *coordinationv1.Lease, 1)
	defer lockwatch.NewWatchHub().Subscribe(lock, lockwatch.Subscriber{OnObject: func(obj any, _ bool) {
		if l, ok := obj.(*coordinationv1.Lease); ok {
			select {
			case got <- l:
			default:
			}
		}
	}})()
	select {
	case l := <-got:
		if len(l.ManagedFields) != 0 || l.Name != "lock-0" {
			t.Fatalf("delivered %s with managed fields %v, want lock-0 without", l.Name, l.ManagedFields)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing delivered")
	}
}
