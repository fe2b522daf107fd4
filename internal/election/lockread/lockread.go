// Package lockread reads the record of a lock object without taking part in
// its election: for status, watches of the holder and tools.
package lockread

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Object returns the record a lock object carries: a *corev1.ConfigMap
// keeps it in the resourcelock.LeaderAnnotationKey annotation, a
// *coordinationv1.Lease in its spec. A ConfigMap without that annotation is
// not a lock and yields nil and no error; a Lease always yields a record
// (unset fields read as zero). A corrupt annotation is an error wrapping
// resourcelock.ErrCorruptRecord, any other object type an error.
func Object(obj runtime.Object) (*resourcelock.Record, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		raw, ok := o.Annotations[resourcelock.LeaderAnnotationKey]
		if !ok {
			return nil, nil
		}
		return resourcelock.DecodeRecord([]byte(raw))
	case *coordinationv1.Lease:
		return resourcelock.LeaseToRecord(o), nil
	}
	return nil, fmt.Errorf("lockread: %T is not a lock object", obj)
}

// Read reads the record of the lock namespace/name of kind
// resourcelock.ConfigMapsResourceLock or resourcelock.LeasesResourceLock
// with one GET. A missing object, or a ConfigMap without a record, yields
// nil and no error; see Object for the rest.
func Read(ctx context.Context, client kubernetes.Interface, kind, namespace, name string) (*resourcelock.Record, error) {
	var obj runtime.Object
	var err error
	switch kind {
	case resourcelock.ConfigMapsResourceLock:
		obj, err = client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	case resourcelock.LeasesResourceLock:
		obj, err = client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	default:
		return nil, fmt.Errorf("lockread: cannot read a lock of kind %q: want %q or %q",
			kind, resourcelock.ConfigMapsResourceLock, resourcelock.LeasesResourceLock)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lockread: read %s %s/%s: %w", kind, namespace, name, err)
	}
	rec, err := Object(obj)
	if err != nil {
		return nil, fmt.Errorf("lockread: %s %s/%s: %w", kind, namespace, name, err)
	}
	return rec, nil
}
