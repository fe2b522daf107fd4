package resourcelock

import (
	"math"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/util/watchlist"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// LeaseLock maps the record onto a coordination.k8s.io/v1 Lease. The holder
// key, which the Lease spec has no field for, lives in the
// LeaseHolderKeyAnnotation annotation. The raw bytes Get returns are the
// JSON encoding of the record.
type LeaseLock struct {
	objectLock[*coordinationv1.Lease, *coordinationv1.LeaseList]
}

// PreferredHolder returns spec.preferredHolder of the object version
// last read, written or watched, and the holder key written with it; empty
// when there is none (lockcap.CoordinatedLock).
func (l *LeaseLock) PreferredHolder() (identity, key string) {
	if !l.valid || l.obj.Spec.PreferredHolder == nil {
		return "", ""
	}
	return *l.obj.Spec.PreferredHolder, l.obj.Annotations[lockmeta.LeasePreferredHolderKeyAnnotation]
}

// leaseKind is where the record lives in a Lease.
var leaseKind = kindAdapter[*coordinationv1.Lease]{
	kind: "Lease", apiVersion: "coordination.k8s.io/v1",
	newObject: func(namespace, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	},
	copyObject: (*coordinationv1.Lease).DeepCopy,
	readRecord: func(lease *coordinationv1.Lease) (*Record, []byte, error) {
		rec := LeaseToRecord(lease)
		return rec, EncodeRecord(*rec), nil
	},
	writeRecord: func(lease *coordinationv1.Lease, r Record) { ApplyRecordToLease(r, lease) },
	resource:    coordinationv1.SchemeGroupVersion.WithResource("leases"),
}

// NewLeaseLock returns a lock on the Lease namespace/name. It does not talk to
// the API server.
func NewLeaseLock(client coordinationv1client.LeasesGetter, namespace, name string, cfg Config) (*LeaseLock, error) {
	if err := validateLocation(namespace, name, cfg); err != nil {
		return nil, err
	}
	return &LeaseLock{objectLock[*coordinationv1.Lease, *coordinationv1.LeaseList]{
		client: ownStackClient[*coordinationv1.Lease, *coordinationv1.LeaseList]{client.Leases(namespace)}, namespace: namespace, name: name, cfg: cfg, kind: leaseKind,
		clientNoWatchList: watchlist.DoesClientNotSupportWatchListSemantics(client), hubKey: client,
	}}, nil
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
// leaving the rest of the object alone (spec.strategy included). An empty
// key removes the annotation. A record that changes the holder, or names
// the preferred holder, fulfils or voids spec.preferredHolder: it is
// cleared, with its key annotation.
func ApplyRecordToLease(r Record, lease *coordinationv1.Lease) {
	holder := r.HolderIdentity
	if p := lease.Spec.PreferredHolder; p != nil && (*p == holder || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != holder) {
		lease.Spec.PreferredHolder = nil
		delete(lease.Annotations, lockmeta.LeasePreferredHolderKeyAnnotation)
	}
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
