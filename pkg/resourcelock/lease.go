package resourcelock

import (
	"context"
	"fmt"
	"math"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// LeaseLock maps the record onto a coordination.k8s.io/v1 Lease. The holder
// key, which the Lease spec has no field for, lives in the
// LeaseHolderKeyAnnotation annotation.
type LeaseLock struct {
	client    coordinationv1client.LeasesGetter
	namespace string
	name      string
	cfg       Config

	// noWatchList is set by New for clients that cannot stream lists.
	noWatchList bool

	lease *coordinationv1.Lease
}

var (
	_ HandoverLock = (*LeaseLock)(nil)
	_ Watchable    = (*LeaseLock)(nil)
)

// NewLeaseLock returns a lock on the Lease namespace/name. It does not talk to
// the API server.
func NewLeaseLock(client coordinationv1client.LeasesGetter, namespace, name string, cfg Config) (*LeaseLock, error) {
	if err := validateLocation(namespace, name, cfg); err != nil {
		return nil, err
	}
	return &LeaseLock{client: client, namespace: namespace, name: name, cfg: cfg}, nil
}

// Get reads the Lease. The raw bytes are the JSON encoding of the record.
func (l *LeaseLock) Get(ctx context.Context) (*Record, []byte, error) {
	lease, err := l.client.Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.lease = lease
	return l.decode()
}

func (l *LeaseLock) decode() (*Record, []byte, error) {
	rec := LeaseToRecord(l.lease)
	return rec, EncodeRecord(*rec), nil
}

// Create creates the Lease holding the record.
func (l *LeaseLock) Create(ctx context.Context, r Record) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace},
	}
	ApplyRecordToLease(r, lease)
	l.cfg.advertise(&lease.ObjectMeta, r)
	created, err := l.client.Leases(l.namespace).Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	l.lease = created
	return nil
}

// Update writes the record over the last seen Lease, keeping its labels and
// other annotations.
func (l *LeaseLock) Update(ctx context.Context, r Record) error {
	if l.lease == nil {
		return ErrNotInitialized
	}
	lease := l.lease.DeepCopy()
	ApplyRecordToLease(r, lease)
	l.cfg.advertise(&lease.ObjectMeta, r)
	updated, err := l.client.Leases(l.namespace).Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.lease = updated
	return nil
}

// Handover implements HandoverLock.
func (l *LeaseLock) Handover() Handover {
	if l.lease == nil {
		return Handover{}
	}
	return readHandover(l.lease.Annotations)
}

// RequestHandover implements HandoverLock.
func (l *LeaseLock) RequestHandover(ctx context.Context, h Handover) error {
	if l.lease == nil {
		return ErrNotInitialized
	}
	lease := l.lease.DeepCopy()
	writeHandover(&lease.ObjectMeta, h)
	updated, err := l.client.Leases(l.namespace).Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.lease = updated
	return nil
}

// ListWatch implements Watchable.
func (l *LeaseLock) ListWatch() cache.ListerWatcher {
	selector := fields.OneTermEqualSelector("metadata.name", l.name).String()
	return &listWatch{
		ListWatch: cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.FieldSelector = selector
				return l.client.Leases(l.namespace).List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.FieldSelector = selector
				return l.client.Leases(l.namespace).Watch(ctx, opts)
			},
		},
		noWatchList: l.noWatchList || watchlist.DoesClientNotSupportWatchListSemantics(l.client),
	}
}

// ExampleObject implements Watchable.
func (l *LeaseLock) ExampleObject() runtime.Object { return &coordinationv1.Lease{} }

// Observe implements Watchable.
func (l *LeaseLock) Observe(obj any, deleted bool) (*Record, []byte, error) {
	o, ok := ownObject(obj, l.namespace, l.name)
	if !ok {
		return nil, nil, ErrForeignObject
	}
	if deleted {
		l.lease = nil
		return &Record{}, nil, nil
	}
	cur, ok := o.(*coordinationv1.Lease)
	if !ok {
		return nil, nil, fmt.Errorf("%s: watch delivered %T, not a Lease", l.Describe(), o)
	}
	if l.lease == nil || newer(cur.ResourceVersion, l.lease.ResourceVersion) {
		l.lease = cur
	}
	return l.decode()
}

// Peek implements Watchable.
func (l *LeaseLock) Peek() (*Record, []byte, error) {
	if l.lease == nil {
		return nil, nil, ErrNotInitialized
	}
	return l.decode()
}

// RecordEvent records an event on the Lease.
func (l *LeaseLock) RecordEvent(eventType, reason, message string) {
	if l.cfg.EventRecorder == nil {
		return
	}
	obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace}}
	if l.lease != nil {
		obj.ObjectMeta = *l.lease.ObjectMeta.DeepCopy()
	}
	obj.TypeMeta = metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}
	l.cfg.EventRecorder.Eventf(obj, eventType, reason, "%s", message)
}

// ResourceVersion implements Interface.
func (l *LeaseLock) ResourceVersion() string {
	if l.lease == nil {
		return ""
	}
	return l.lease.ResourceVersion
}

// Identity implements Interface.
func (l *LeaseLock) Identity() string { return l.cfg.Identity }

// Key implements Interface.
func (l *LeaseLock) Key() string { return l.cfg.Key }

// Describe implements Interface.
func (l *LeaseLock) Describe() string {
	return fmt.Sprintf("Lease %s/%s", l.namespace, l.name)
}

// LeaseToRecord reads the record from a Lease; unset fields read as zero.
func LeaseToRecord(lease *coordinationv1.Lease) *Record {
	var r Record
	spec := lease.Spec
	if spec.HolderIdentity != nil {
		r.HolderIdentity = *spec.HolderIdentity
	}
	if spec.LeaseDurationSeconds != nil {
		r.LeaseDurationSeconds = int(*spec.LeaseDurationSeconds)
	}
	if spec.LeaseTransitions != nil {
		r.LeaderTransitions = int(*spec.LeaseTransitions)
	}
	if spec.AcquireTime != nil {
		r.AcquireTime = metav1.NewTime(spec.AcquireTime.Time)
	}
	if spec.RenewTime != nil {
		r.RenewTime = metav1.NewTime(spec.RenewTime.Time)
	}
	r.HolderKey = lease.Annotations[LeaseHolderKeyAnnotation]
	return &r
}

// ApplyRecordToLease writes r into lease's spec and holder-key annotation,
// leaving the rest of the object alone. An empty key removes the annotation.
func ApplyRecordToLease(r Record, lease *coordinationv1.Lease) {
	holder := r.HolderIdentity
	duration := clampInt32(r.LeaseDurationSeconds)
	transitions := clampInt32(r.LeaderTransitions)
	lease.Spec.HolderIdentity = &holder
	lease.Spec.LeaseDurationSeconds = &duration
	lease.Spec.LeaseTransitions = &transitions
	lease.Spec.AcquireTime = &metav1.MicroTime{Time: r.AcquireTime.Time}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: r.RenewTime.Time}
	if r.HolderKey != "" {
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[LeaseHolderKeyAnnotation] = r.HolderKey
	} else {
		delete(lease.Annotations, LeaseHolderKeyAnnotation)
	}
}

// clampInt32 bounds v to the range of the Lease spec's int32 fields, so that
// a huge counter or duration written by another holder never wraps around.
func clampInt32(v int) int32 {
	switch {
	case v > math.MaxInt32:
		return math.MaxInt32
	case v < 0:
		return 0
	default:
		return int32(v)
	}
}
