package resourcelock

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// multiLock is the lock newMultiLock returns.
type multiLock struct {
	Primary   Interface
	Secondary Interface
}

// newMultiLock returns a lock over primary and secondary, which must write
// the same identity and key. It holds one election in two lock objects at
// once, typically a ConfigMap and a Lease of the same name. It is the way to
// move an election from one lock kind to the other during a rolling update
// without two leaders:
//
//  1. all instances use the old kind;
//  2. roll out instances that use a multi lock with the old kind as primary
//     and the new kind as secondary: they share the old object with the
//     instances not yet updated, and also keep the new object up to date;
//  3. roll out instances that use only the new kind: they share the new
//     object with the instances of step 2.
//
// Each step must finish before the next starts: an instance of step 1 and
// one of step 3 share no object and would both lead.
//
// Every write goes to both objects, primary first; a write that succeeds on
// primary and fails on secondary returns the error, and the elector's next
// attempt reads both again. Handover requests and the holder's Pod mark live
// in primary's object. A multi lock cannot be watched: electors using it
// poll.
func newMultiLock(primary, secondary Interface) (Interface, error) {
	switch {
	case primary == nil || secondary == nil:
		return nil, errors.New("multi lock: both locks must be set")
	case primary.Identity() != secondary.Identity() || primary.Key() != secondary.Key():
		return nil, fmt.Errorf("multi lock: %s and %s write different identities or keys", primary.Describe(), secondary.Describe())
	}
	return &multiLock{Primary: primary, Secondary: secondary}, nil
}

// Get reads both objects. When only one exists, its record is returned (the
// other is created by the next write). When both name the same holder, or
// the secondary names nobody, Primary's record is returned. When they name
// different holders, which happens only while instances that use one kind
// alone overlap with instances that use the other, the record returned
// names both holders joined by a comma: no candidate recognises it as its
// own, and it expires like any other record unless one of them renews.
func (m *multiLock) Get(ctx context.Context) (*Record, []byte, error) {
	p, pRaw, pErr := m.Primary.Get(ctx)
	s, sRaw, sErr := m.Secondary.Get(ctx)
	switch {
	case pErr != nil && !apierrors.IsNotFound(pErr):
		return nil, pRaw, pErr
	case sErr != nil && !apierrors.IsNotFound(sErr):
		return nil, sRaw, sErr
	case pErr != nil && sErr != nil:
		return nil, nil, pErr // both not found
	case pErr != nil:
		return s, sRaw, nil
	case sErr != nil || s.HolderIdentity == "" || s.HolderIdentity == p.HolderIdentity:
		return p, pRaw, nil
	}
	if p.HolderIdentity == "" {
		return s, sRaw, nil
	}
	joined := *p
	joined.HolderIdentity = p.HolderIdentity + "," + s.HolderIdentity
	joined.RenewTime = laterTime(p, s)
	return &joined, EncodeRecord(joined), nil
}

// laterTime is the later renew time of two records.
func laterTime(a, b *Record) metav1.Time {
	if b.RenewTime.After(a.RenewTime.Time) {
		return b.RenewTime
	}
	return a.RenewTime
}

// Create creates both objects; one that already exists is updated instead.
func (m *multiLock) Create(ctx context.Context, r Record) error {
	if err := m.Primary.Create(ctx, r); err != nil {
		return err
	}
	return writeOrCreate(ctx, m.Secondary, r)
}

// Update writes both objects over the versions last seen; a missing
// Secondary is created.
func (m *multiLock) Update(ctx context.Context, r Record) error {
	if err := m.Primary.Update(ctx, r); err != nil {
		return err
	}
	return writeOrCreate(ctx, m.Secondary, r)
}

// writeOrCreate updates l, or creates it when it has not been seen or no
// longer exists.
func writeOrCreate(ctx context.Context, l Interface, r Record) error {
	err := l.Update(ctx, r)
	if errors.Is(err, ErrNotInitialized) || apierrors.IsNotFound(err) {
		err = l.Create(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", l.Describe(), err)
	}
	return nil
}

// Handover implements lockcap.HandoverLock with Primary's annotation; the zero value
// when Primary cannot hand over.
func (m *multiLock) Handover() lockmeta.Handover {
	if h, ok := m.Primary.(handoverLock); ok {
		return h.Handover()
	}
	return lockmeta.Handover{}
}

// RequestHandover implements lockcap.HandoverLock on Primary's object.
func (m *multiLock) RequestHandover(ctx context.Context, h lockmeta.Handover) error {
	if hl, ok := m.Primary.(handoverLock); ok {
		return hl.RequestHandover(ctx, h)
	}
	return fmt.Errorf("%s does not support handover", m.Primary.Describe())
}

// RecordEvent records the event on both objects.
func (m *multiLock) RecordEvent(eventType, reason, message string) {
	m.Primary.RecordEvent(eventType, reason, message)
	m.Secondary.RecordEvent(eventType, reason, message)
}

// ResourceVersion joins both objects' versions, so that a write to either
// shows.
// ObjectUID is the primary's (see lockcap.ObjectUID), whose object carries
// the handover annotation.
func (m *multiLock) ObjectUID() string {
	if u, ok := m.Primary.(interface{ ObjectUID() string }); ok {
		return u.ObjectUID()
	}
	return ""
}

func (m *multiLock) ResourceVersion() string {
	return m.Primary.ResourceVersion() + "+" + m.Secondary.ResourceVersion()
}

// Identity implements Interface.
func (m *multiLock) Identity() string { return m.Primary.Identity() }

// Key implements Interface.
func (m *multiLock) Key() string { return m.Primary.Key() }

// Describe names both objects.
func (m *multiLock) Describe() string {
	return m.Primary.Describe() + " + " + m.Secondary.Describe()
}

// handoverLock and holderPodReader are the parts of lockcap.HandoverLock and
// lockcap.HolderPodReader that a multi lock asks of its primary.
type (
	handoverLock interface {
		Handover() lockmeta.Handover
		RequestHandover(ctx context.Context, h lockmeta.Handover) error
	}
	holderPodReader interface {
		HolderPod() (lockmeta.HolderPod, bool)
	}
)
