package lockread

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func TestRead(t *testing.T) {
	renew := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 20, 0, time.UTC))
	want := resourcelock.Record{HolderIdentity: "a", HolderKey: "canary", LeaseDurationSeconds: 30, RenewTime: renew, LeaderTransitions: 3}
	meta := func(name string, annotations map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: annotations}
	}
	objs := []runtime.Object{
		&corev1.ConfigMap{ObjectMeta: meta("cm", map[string]string{resourcelock.LeaderAnnotationKey: string(resourcelock.EncodeRecord(want))})},
		&corev1.ConfigMap{ObjectMeta: meta("plain", nil)},
		&corev1.ConfigMap{ObjectMeta: meta("corrupt", map[string]string{resourcelock.LeaderAnnotationKey: "{"})},
		&coordinationv1.Lease{ObjectMeta: meta("lease", map[string]string{resourcelock.LeaseHolderKeyAnnotation: "canary"}),
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](30),
				RenewTime: &metav1.MicroTime{Time: renew.Time}, LeaseTransitions: ptr.To[int32](3)}},
	}
	client := fake.NewClientset(objs...)
	for _, tc := range []struct {
		kind, name string
		want       *resourcelock.Record
		wantErr    error // nil: no error
		anyErr     bool
	}{
		{kind: resourcelock.ConfigMapsResourceLock, name: "cm", want: &want},
		{kind: resourcelock.LeasesResourceLock, name: "lease", want: &want},
		{kind: resourcelock.ConfigMapsResourceLock, name: "plain"},
		{kind: resourcelock.ConfigMapsResourceLock, name: "absent"},
		{kind: resourcelock.LeasesResourceLock, name: "absent"},
		{kind: resourcelock.ConfigMapsResourceLock, name: "corrupt", wantErr: resourcelock.ErrCorruptRecord},
		{kind: "secrets", name: "cm", anyErr: true},
	} {
		got, err := Read(context.Background(), client, tc.kind, "ns", tc.name)
		switch {
		case tc.wantErr != nil && !errors.Is(err, tc.wantErr), tc.anyErr && err == nil:
			t.Errorf("%s %s: error %v; want %v", tc.kind, tc.name, err, tc.wantErr)
		case tc.wantErr == nil && !tc.anyErr && err != nil:
			t.Errorf("%s %s: unexpected error %v", tc.kind, tc.name, err)
		case (got == nil) != (tc.want == nil) || got != nil && !same(*got, *tc.want):
			t.Errorf("%s %s = %+v; want %+v", tc.kind, tc.name, got, tc.want)
		}
	}
	if _, err := Object(&corev1.Secret{}); err == nil {
		t.Error("Object(Secret) succeeded")
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("Read made a %s request; want only get", a.GetVerb())
		}
	}
}

func same(a, b resourcelock.Record) bool {
	return a.HolderIdentity == b.HolderIdentity && a.HolderKey == b.HolderKey &&
		a.LeaseDurationSeconds == b.LeaseDurationSeconds && a.LeaderTransitions == b.LeaderTransitions &&
		a.AcquireTime.Time.Equal(b.AcquireTime.Time) && a.RenewTime.Time.Equal(b.RenewTime.Time)
}
