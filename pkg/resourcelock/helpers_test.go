package resourcelock

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// recordsDir holds the shared record fixtures (see its README.md).
const recordsDir = "../../testdata/records"

const (
	testNamespace = "istio-system"
	testName      = "istio-leader"
)

// readFixture returns the annotation value kept in testdata/records/name.
// A fixture file holds exactly the value; a single trailing newline, which
// editors tend to add, is not part of the value and is dropped here.
func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(recordsDir, name))
	if err != nil {
		tb.Fatalf("reading fixture: %v", err)
	}
	return bytes.TrimSuffix(raw, []byte("\n"))
}

// mustTime parses an RFC 3339 time for use in expected records.
func mustTime(tb testing.TB, s string) metav1.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		tb.Fatalf("bad time %q in test: %v", s, err)
	}
	return metav1.NewTime(t)
}

// sameRecord compares records field by field, times by instant: decoding
// yields times in time.Local, which reflect.DeepEqual would tell apart from
// the same instant in UTC.
func sameRecord(a, b Record) bool {
	return a.HolderIdentity == b.HolderIdentity &&
		a.HolderKey == b.HolderKey &&
		a.LeaseDurationSeconds == b.LeaseDurationSeconds &&
		a.LeaderTransitions == b.LeaderTransitions &&
		a.AcquireTime.Time.Equal(b.AcquireTime.Time) &&
		a.RenewTime.Time.Equal(b.RenewTime.Time)
}

func fmtRecord(r Record) string {
	return fmt.Sprintf("{identity=%q key=%q duration=%d acquire=%s renew=%s transitions=%d}",
		r.HolderIdentity, r.HolderKey, r.LeaseDurationSeconds,
		r.AcquireTime.UTC().Format(time.RFC3339Nano), r.RenewTime.UTC().Format(time.RFC3339Nano),
		r.LeaderTransitions)
}

// newClientset returns a fake clientset holding objs that, unlike the stock
// fake, behaves like the API server on resourceVersion for configmaps and
// leases: create and update store a fresh resourceVersion in the object, and
// an update carrying a stale one fails with a Conflict. An update without a
// resourceVersion (an unconditional overwrite, which locks must never do)
// fails the test.
func newClientset(tb testing.TB, objs ...runtime.Object) *fake.Clientset {
	tb.Helper()
	cs := fake.NewClientset(objs...)
	tracker := cs.Tracker()

	var mu sync.Mutex
	lastRV := 1000 // above anything a test seeds
	nextRV := func() string {
		lastRV++
		return strconv.Itoa(lastRV)
	}

	create := func(action k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		obj := action.(k8stesting.CreateAction).GetObject().DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		if m.GetResourceVersion() != "" {
			return true, nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
		}
		m.SetResourceVersion(nextRV())
		if err := tracker.Create(action.GetResource(), obj, action.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj.DeepCopyObject(), nil
	}

	update := func(action k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		obj := action.(k8stesting.UpdateAction).GetObject().DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		gvr := action.GetResource()
		current, err := tracker.Get(gvr, action.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		cm, err := meta.Accessor(current)
		if err != nil {
			return true, nil, err
		}
		if m.GetResourceVersion() == "" {
			tb.Errorf("unconditional update of %s %s/%s (no resourceVersion)", gvr.Resource, action.GetNamespace(), m.GetName())
		}
		if m.GetResourceVersion() != cm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
				fmt.Errorf("the object has been modified (resourceVersion %q, stored %q)", m.GetResourceVersion(), cm.GetResourceVersion()))
		}
		m.SetResourceVersion(nextRV())
		if err := tracker.Update(gvr, obj, action.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj.DeepCopyObject(), nil
	}

	for _, resource := range []string{"configmaps", "leases"} {
		cs.PrependReactor("create", resource, create)
		cs.PrependReactor("update", resource, update)
	}
	return cs
}

// verbs lists the verbs of the actions the clientset saw, in order.
func verbs(cs *fake.Clientset) []string {
	out := []string{}
	for _, a := range cs.Actions() {
		out = append(out, a.GetVerb())
	}
	return out
}

// abbrev shortens b for a failure message.
func abbrev(b []byte) string {
	const limit = 300
	if len(b) <= limit {
		return string(b)
	}
	return fmt.Sprintf("%s...(%d bytes)", b[:limit], len(b))
}
