package resourcelock

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// ObjectRecord returns the record a lock object carries, for readers that
// only look: a *corev1.ConfigMap keeps it in the LeaderAnnotationKey
// annotation, a *coordinationv1.Lease in its spec. A ConfigMap without that
// annotation is not a lock and yields nil and no error; a Lease always
// yields a record (unset fields read as zero). A corrupt annotation is an
// error wrapping ErrCorruptRecord, any other object type an error.
func ObjectRecord(obj runtime.Object) (*Record, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		raw, ok := o.Annotations[LeaderAnnotationKey]
		if !ok {
			return nil, nil
		}
		return DecodeRecord([]byte(raw))
	case *coordinationv1.Lease:
		return LeaseToRecord(o), nil
	}
	return nil, fmt.Errorf("resourcelock: %T is not a lock object", obj)
}

// ReadRecord reads the record of the lock namespace/name of kind
// ConfigMapsResourceLock or LeasesResourceLock with one GET, without
// taking part in the election. A missing object, or a ConfigMap without a
// record, yields nil and no error; see ObjectRecord for the rest.
func ReadRecord(ctx context.Context, client kubernetes.Interface, kind, namespace, name string) (*Record, error) {
	var obj runtime.Object
	var err error
	switch kind {
	case ConfigMapsResourceLock:
		obj, err = client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	case LeasesResourceLock:
		obj, err = client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	default:
		return nil, fmt.Errorf("resourcelock: cannot read a lock of kind %q: want %q or %q",
			kind, ConfigMapsResourceLock, LeasesResourceLock)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resourcelock: read %s %s/%s: %w", kind, namespace, name, err)
	}
	rec, err := ObjectRecord(obj)
	if err != nil {
		return nil, fmt.Errorf("resourcelock: %s %s/%s: %w", kind, namespace, name, err)
	}
	return rec, nil
}
