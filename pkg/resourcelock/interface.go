// Package resourcelock stores a leader election record in a Kubernetes object.
//
// Two kinds of lock exist, both wire-compatible with the locks that istiod and
// client-go's leaderelection package write:
//
//   - ConfigMapLock keeps the record as JSON in the annotation
//     control-plane.alpha.kubernetes.io/leader of a ConfigMap.
//   - LeaseLock maps the record onto a coordination.k8s.io/v1 Lease spec and
//     keeps the holder key in the annotation leader.istio.io/holder-key.
//
// Both are one generic object lock with a small adapter per kind. The lock
// New builds for ConfigMapsLeasesResourceLock and LeasesConfigMapsResourceLock
// holds a ConfigMap and a Lease together, to move an
// election from one kind to the other during a rolling update.
//
// Every write is an optimistic-concurrency update of the object last read or
// written through the same lock: a write that races another one fails with a
// Kubernetes Conflict error (apierrors.IsConflict) instead of overwriting it.
// Writes keep every label, annotation and data key of the object that the lock
// does not own.
//
// A lock is not safe for concurrent use by several goroutines; the elector
// owning it serialises all calls.
package resourcelock

import (
	"context"
	"errors"
)

const (
	// LeaderAnnotationKey is the ConfigMap annotation that holds the JSON record.
	LeaderAnnotationKey = "control-plane.alpha.kubernetes.io/leader"
	// LeaseHolderKeyAnnotation is the Lease annotation that holds the holder key.
	// It is removed when the key is empty.
	LeaseHolderKeyAnnotation = "leader.istio.io/holder-key"
)

// ErrCorruptRecord is wrapped by the error Get returns when the object exists
// but its record cannot be decoded. The object is still remembered by the
// lock, so a later Update can overwrite the broken record while keeping the
// rest of the object.
var ErrCorruptRecord = errors.New("corrupt leader election record")

// ErrNotInitialized is returned by Update when neither Get nor Create has
// succeeded yet, so there is no object version to update.
var ErrNotInitialized = errors.New("lock object not read yet: call Get or Create first")

// Interface is a place to store a leader election record.
type Interface interface {
	// Get reads the record. It returns the decoded record and its canonical
	// JSON encoding, used to notice changes. A missing object is reported by a
	// NotFound API error; an undecodable record by an error wrapping
	// ErrCorruptRecord, together with the raw bytes found.
	Get(ctx context.Context) (*Record, []byte, error)
	// Create creates the lock object holding the record.
	Create(ctx context.Context, r Record) error
	// Update writes the record over the object version last seen by Get,
	// Create or Update. A concurrent write makes it fail with a Conflict error.
	Update(ctx context.Context, r Record) error
	// RecordEvent records a Kubernetes Event about this lock, if the lock was
	// configured with an event recorder. eventType is corev1.EventTypeNormal
	// or corev1.EventTypeWarning.
	RecordEvent(eventType, reason, message string)
	// ResourceVersion is the resourceVersion of the lock object as last read
	// or written through this lock; empty before the first success. Every
	// successful write changes it, even one that leaves the record bytes
	// unchanged (two renewals within the same second), so it is the reliable
	// sign that the holder is alive.
	ResourceVersion() string
	// Identity is the holder identity this lock writes.
	Identity() string
	// Key is the holder key this lock writes.
	Key() string
	// Describe names the lock object, as "<kind> <namespace>/<name>".
	Describe() string
}
