package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// heartbeat renews one session Lease.
type heartbeat struct {
	cfg   Config
	name  string
	token string
	start time.Time
	log   *zap.Logger

	lease *coordinationv1.Lease // the version last written or read; loop only

	mu    sync.Mutex
	sent  time.Time   // when the last successful write was sent
	ok    bool        // the latest attempt succeeded
	tried []time.Time // when the latest writes were sent, oldest first; see sentAt
}

// maxTried bounds the send times remembered for sentAt: more than the
// writes a lease holds at one write per retry period.
const maxTried = 16

func newHeartbeat(cfg Config, log *zap.Logger) *heartbeat {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	name := LeaseName(cfg.Identity, cfg.LeaseDuration)
	return &heartbeat{cfg: cfg, name: name, token: hex.EncodeToString(b), start: cfg.Clock.Now(),
		log: log.With(zap.String("session", name))}
}

// ref names this session in records.
func (h *heartbeat) ref() string { return Ref(h.name, h.token) }

// renewed reports when the last successful write was sent, and whether the
// session is current: its last write is less than one and a half retry
// periods old (one failed attempt, retried soon after, does not stop it
// being current).
func (h *heartbeat) renewed(now time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sent, !h.sent.IsZero() && now.Sub(h.sent) < h.cfg.RetryPeriod*3/2
}

// noteTry remembers that a write with renewTime sent is about to be sent.
func (h *heartbeat) noteTry(sent time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.tried) == maxTried {
		h.tried = append(h.tried[:0], h.tried[1:]...)
	}
	h.tried = append(h.tried, sent)
}

// sentAt is when this process sent the write that stored renew as the
// renewTime of its Lease, by its own clock (with its monotonic reading,
// so that a step of the wall clock does not move it); false when it is
// not one of the latest writes. A Lease keeps microseconds.
func (h *heartbeat) sentAt(renew time.Time) (time.Time, bool) {
	renew = renew.Truncate(time.Microsecond)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.tried) - 1; i >= 0; i-- {
		if h.tried[i].Truncate(time.Microsecond).Equal(renew) {
			return h.tried[i], true
		}
	}
	return time.Time{}, false
}

// run renews until ctx ends: every RetryPeriod after a success, every
// quarter of one after a failure.
func (h *heartbeat) run(ctx context.Context) {
	clk := h.cfg.Clock
	for {
		ok := h.renewOnce(ctx)
		wait := h.cfg.RetryPeriod
		if !ok {
			wait /= 4
		}
		t := clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// renewOnce writes the Lease once (reading or creating it first when the
// version last written is unknown, stale or gone); it reports success.
func (h *heartbeat) renewOnce(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RetryPeriod)
	defer cancel()
	sent := h.cfg.Clock.Now()
	h.noteTry(sent)
	err := h.write(ctx, sent)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		h.lease = nil // read it again, or create it
		err = h.write(ctx, sent)
	}
	h.mu.Lock()
	was := h.ok
	h.ok = err == nil
	if err == nil {
		h.sent = sent
	}
	h.mu.Unlock()
	switch {
	case err != nil && (was || h.sent.IsZero()):
		h.log.Warn("could not renew the session; its holders renew their records themselves meanwhile", zap.Error(err))
	case err == nil && !was:
		h.log.Info("session renewed", zap.String("lease", h.cfg.Namespace+"/"+h.name))
	}
	return err == nil
}

// write stores this session's heartbeat at time now over the version last
// seen, reading it (or creating it) first when there is none.
func (h *heartbeat) write(ctx context.Context, now time.Time) error {
	leases := h.cfg.Client.CoordinationV1().Leases(h.cfg.Namespace)
	if h.lease == nil {
		cur, err := leases.Get(ctx, h.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created, err := leases.Create(ctx, h.object(h.newLease(), now), metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create session lease %s/%s: %w", h.cfg.Namespace, h.name, err)
			}
			h.lease = created
			return nil
		case err != nil:
			return fmt.Errorf("get session lease %s/%s: %w", h.cfg.Namespace, h.name, err)
		}
		h.lease = cur
	}
	updated, err := leases.Update(ctx, h.object(h.lease.DeepCopy(), now), metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("renew session lease %s/%s: %w", h.cfg.Namespace, h.name, err)
	}
	h.lease = updated
	return nil
}

// newLease is an empty session Lease.
func (h *heartbeat) newLease() *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: h.name, Namespace: h.cfg.Namespace}}
	if h.cfg.Owner != nil {
		l.OwnerReferences = []metav1.OwnerReference{*h.cfg.Owner}
	}
	return l
}

// object fills l with this session's heartbeat at now, keeping its other
// labels and annotations.
func (h *heartbeat) object(l *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[Label] = "true"
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[TokenAnnotation] = h.token
	l.Spec.HolderIdentity = ptr.To(h.cfg.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(leaseSeconds(h.cfg.LeaseDuration)))
	l.Spec.AcquireTime = &metav1.MicroTime{Time: h.start}
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	return l
}

// end closes the session: it clears the holder (followers then know at once
// that its holders stopped) and deletes the Lease. Only called once every
// election of the session has stopped its work.
func (h *heartbeat) end() {
	if h.lease == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.RenewDeadline)
	defer cancel()
	leases := h.cfg.Client.CoordinationV1().Leases(h.cfg.Namespace)
	ended := h.lease.DeepCopy()
	ended.Spec.HolderIdentity = nil
	ended.Spec.RenewTime = &metav1.MicroTime{Time: h.cfg.Clock.Now()}
	updated, err := leases.Update(ctx, ended, metav1.UpdateOptions{})
	if err != nil {
		h.log.Warn("could not end the session; its records expire by their leases", zap.Error(err))
		return
	}
	err = leases.Delete(ctx, h.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &updated.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) {
		h.log.Warn("could not delete the ended session lease", zap.Error(err))
	}
}
