package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/meshd-io/meshd/internal/election/ordered"
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
	// kick asks the loop for a heartbeat now (see live.echoedSince).
	kick chan struct{}

	mu   sync.Mutex
	sent time.Time // when the last successful write was sent
	ok   bool      // the latest attempt succeeded
	// sends maps the renew time written by each recent write (as the Lease
	// stores it: wall clock, microseconds) to when it was sent by this
	// process's clock, monotonic reading included, and to its place in the
	// order of sends; oldest first in sendOrder. An echo is timed by its
	// send time, never by the wall time the Lease carries, so that a step
	// of the wall clock cannot make a stale echo look current; and it is
	// ordered by its place, so that a send that followed an event counts
	// as later than it even when the clock read the same (see seqNow).
	sends     map[int64]sendRecord
	sendOrder []int64
	seq       uint64 // sends noted so far
	lastKey   int64  // the renew time the latest send stores (wallKey)
	asked     bool   // a heartbeat was asked for (sendNow) and not yet noted
}

// sendRecord is one write of the heartbeat: when this process sent it, and
// its place in the order of sends (the first is 1).
type sendRecord struct {
	local time.Time
	seq   uint64
}

// maxSends bounds the sends remembered for their echoes: a heartbeat that
// comes back later than that many periods counts as never echoed, and the
// holders renew their records themselves.
const maxSends = 16

// wallKey is how a renew time is stored in a Lease and compared: its wall
// clock reading in microseconds.
func wallKey(t time.Time) int64 { return t.Round(0).UnixMicro() }

// noteSendAs remembers a write that stores the renew time wall and was
// sent at local, as the next in the order of sends. h.mu is held (or h is
// not shared yet).
func (h *heartbeat) noteSendAs(wall, local time.Time) {
	if h.sends == nil {
		h.sends = map[int64]sendRecord{}
	}
	k := wallKey(wall)
	if _, seen := h.sends[k]; !seen {
		h.sendOrder = append(h.sendOrder, k)
	}
	h.seq++
	h.sends[k] = sendRecord{local: local, seq: h.seq}
	h.lastKey, h.asked = max(h.lastKey, k), false
	if len(h.sendOrder) > maxSends {
		delete(h.sends, h.sendOrder[0])
		h.sendOrder = h.sendOrder[1:]
	}
}

// renewTimeFor is the renew time a write sent at sent stores: sent
// itself, or a microsecond after the latest renew time stored when sent
// is not later (a coarse or a fake clock, or a wall clock stepped back),
// so that the renew times of a session only ever rise and each names one
// write. Were one stored again, even after the write that first stored it
// was forgotten (see maxSends), the Lease as that write left it, delivered
// late by a list, would be taken for the echo of the later write. h.mu is
// held.
func (h *heartbeat) renewTimeFor(sent time.Time) time.Time {
	if wallKey(sent) > h.lastKey {
		return sent
	}
	return time.UnixMicro(h.lastKey + 1).In(sent.Location())
}

// sentAt is when this process sent the write whose stored renew time is
// renew, and its place in the order of sends; ok is false unless it is one
// of the recent writes it remembers.
func (h *heartbeat) sentAt(renew time.Time) (sendRecord, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.sends[wallKey(renew)]
	return r, ok
}

// seqNow is the place of the latest send noted: a send noted after a call
// has a greater one, and its write starts after the call, whatever the
// clock reads.
func (h *heartbeat) seqNow() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

func newHeartbeat(cfg Config, log *zap.Logger) *heartbeat {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	name := LeaseName(cfg.Identity, cfg.LeaseDuration)
	return &heartbeat{cfg: cfg, name: name, token: hex.EncodeToString(b), start: cfg.Clock.Now(),
		log: log.With(zap.String("session", name)), kick: make(chan struct{}, 1)}
}

// ref names this session in records.
func (h *heartbeat) ref() string { return Ref(h.name, h.token) }

// renewed reports when the last successful write was sent (zero before the
// first).
func (h *heartbeat) renewed() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sent
}

// run renews until ctx ends: every RetryPeriod after a success, every
// quarter of one after a failure, and at once when kicked.
func (h *heartbeat) run(ctx context.Context) {
	clk := h.cfg.Clock
	for {
		ok := h.renewOnce(ctx)
		wait := h.cfg.RetryPeriod
		if !ok {
			wait /= 4
		}
		t := clk.NewTimer(wait)
		// A kick and the timer at once are taken in a fixed order (package
		// ordered), so that the same events give the same heartbeats.
		which := ordered.First3(ctx.Done(), h.kick, t.C())
		t.Stop()
		if which == 0 {
			return
		}
	}
}

// sendNow asks the loop for a heartbeat now, unless one is already asked
// for and not yet sent. It never blocks.
func (h *heartbeat) sendNow() {
	h.mu.Lock()
	asked := h.asked
	h.asked = true
	h.mu.Unlock()
	if asked {
		return // the loop may have taken the request and not yet noted its send
	}
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// renewOnce writes the Lease once (reading or creating it first when the
// version last written is unknown, stale or gone); it reports success.
func (h *heartbeat) renewOnce(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RetryPeriod)
	defer cancel()
	sent := h.cfg.Clock.Now()
	// Remembered before the write: its echo may come through the watch
	// before the write returns, and a write whose answer is lost still
	// comes back if it happened.
	h.mu.Lock()
	wall := h.renewTimeFor(sent)
	h.noteSendAs(wall, sent)
	h.mu.Unlock()
	err := h.write(ctx, wall)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		h.lease = nil // read it again, or create it
		err = h.write(ctx, wall)
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
//
// A renew whose answer was lost when the heartbeat stopped may have moved
// the Lease past the version this process holds; end then reads it again
// once and ends it if it still carries this session's token. A Lease that
// another session of the same identity has taken over is left alone.
func (h *heartbeat) end() {
	if h.lease == nil && h.renewed().IsZero() {
		return // never written
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.RenewDeadline)
	defer cancel()
	leases := h.cfg.Client.CoordinationV1().Leases(h.cfg.Namespace)
	cur := h.lease
	var updated *coordinationv1.Lease
	var err error
	for range 2 {
		if cur == nil {
			if cur, err = leases.Get(ctx, h.name, metav1.GetOptions{}); err != nil {
				break
			}
			if cur.Annotations[TokenAnnotation] != h.token {
				return
			}
		}
		ended := cur.DeepCopy()
		ended.Spec.HolderIdentity = nil
		ended.Spec.RenewTime = &metav1.MicroTime{Time: h.cfg.Clock.Now()}
		if updated, err = leases.Update(ctx, ended, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			break
		}
		cur = nil
	}
	switch {
	case apierrors.IsNotFound(err):
		return
	case err != nil:
		h.log.Warn("could not end the session; its records expire by their leases", zap.Error(err))
		return
	}
	err = leases.Delete(ctx, h.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &updated.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) {
		h.log.Warn("could not delete the ended session lease", zap.Error(err))
	}
}
