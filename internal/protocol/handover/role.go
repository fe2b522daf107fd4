package handover

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/protocol"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Problems lists what handover needs of the elector's settings: a lock
// that carries the annotation (lock is nil when unset), and a grace longer
// than retryPeriod. p is the elector's Config.Handover (nil: no handover,
// nothing to check).
func Problems(p protocol.Handover, lock resourcelock.Interface, retryPeriod time.Duration) []string {
	if p == nil {
		return nil
	}
	var msgs []string
	if _, ok := lock.(lockcap.HandoverLock); !ok && lock != nil {
		msgs = append(msgs, fmt.Sprintf("Handover needs a lock that supports handover; %T does not", lock))
	}
	if g := p.Grace(); g <= retryPeriod {
		msgs = append(msgs, fmt.Sprintf("HandoverGrace %v must be greater than RetryPeriod %v (a polling holder answers at its next renew)", g, retryPeriod))
	}
	return msgs
}

// Timing is the elector's timings that the core's side of handover needs.
type Timing = lockcap.Timing

// Role is handover as the elector core calls it: the elector's
// Config.Handover with the decisions the core takes on the annotation, the
// record and its timings. Without handover it is the null object for every
// method it defines itself: nothing was asked, nothing is pending, promised
// or waited for. The protocol's own methods (Ask, Answer, Retract, Grace,
// Reconsiders) are called only when On. Role holds the lock and the
// timings, never the core; the record writes stay the core's. It is one
// pointer, nil when the candidate is not cooperative, so that the many
// electors that do not hand over carry no handover state.
type Role struct{ *cooperative }

// cooperative is the handover of a cooperative candidate.
type cooperative struct {
	protocol.Handover
	hl  lockcap.HandoverLock // the lock, with its annotation
	t   Timing
	log *zap.Logger
}

// NewRole returns the handover of the candidate whose lock is lock; p is
// nil when it is not cooperative. Validation (Problems) has checked that
// the lock of a cooperative one carries the annotation.
func NewRole(p protocol.Handover, lock resourcelock.Interface, t Timing, log *zap.Logger) Role {
	if p == nil {
		return Role{}
	}
	return Role{&cooperative{Handover: p, hl: lock.(lockcap.HandoverLock), t: t, log: log}}
}

// On reports whether this candidate is cooperative.
func (r Role) On() bool { return r.cooperative != nil }

// Triggered tells the protocol that the elector was triggered.
func (r Role) Triggered() {
	if r.On() {
		r.Handover.Triggered()
	}
}

// WakeAt is when the handover state may change by itself; zero when
// nothing is waited for.
func (r Role) WakeAt(now time.Time) time.Time {
	if !r.On() {
		return time.Time{}
	}
	return r.Handover.WakeAt(now)
}

// AskedAt is when this candidate last asked the current holder's term;
// zero when it has not (or is not cooperative).
func (r Role) AskedAt() time.Time {
	if !r.On() {
		return time.Time{}
	}
	return r.Handover.AskedAt()
}

// Successor is the fresh request to this holder from a candidate entitled
// now; nil when there is none.
func (r Role) Successor(now time.Time) *lockmeta.Handover {
	if !r.On() {
		return nil
	}
	return r.Handover.Successor(now)
}

// Wrote tells the protocol that a write of the lock sent at now succeeded.
func (r Role) Wrote(now time.Time) {
	if r.On() {
		r.Handover.Wrote(now)
	}
}

// Pending reports whether the lock object last seen carries a handover
// request addressed to this holder that it has not answered yet. Refused
// requests are reconsidered at every renew and on Trigger.
func (r Role) Pending() bool {
	return r.On() && r.hl.Handover().Pending(r.hl.Identity())
}

// ToAnswer reports whether the holder has a request to answer now: one not answered yet, or a fresh one it
// refused whose candidate it would accept now (the default changed
// since). A renew may be left to the session only when there is none;
// otherwise the refusal would stand for as long as the session lives.
func (r Role) ToAnswer(now time.Time) bool {
	return r.Pending() || (r.On() && r.Reconsiders(now))
}

// Respond lets a leader answer a handover request addressed to it, at now
// with its fence as given: it returns the request when it accepted one;
// nil when there was nothing to act on, when it is not cooperative, or when
// its answer conflicted. A conflict means the object it answered on is
// stale (another candidate asked since, and the watch has not delivered
// it, or is broken): the caller then reads the lock and renews, and the
// next renew answers the request the object carries now. Before, the error
// ended the attempt, and every later renew answered on the same stale
// object until the renew deadline passed.
func (r Role) Respond(ctx context.Context, now, fence time.Time) (*lockmeta.Handover, error) {
	if !r.On() {
		return nil, nil
	}
	stopWithin := r.StopWithin(fence, now)
	if r.hl.Handover().HonoursFence {
		// The fence goes with the answer, and the candidate waits it out:
		// the holder names it as soon as its work has stopped.
		stopWithin = r.StopWithin(now, now)
	}
	h, err := r.Answer(ctx, now, stopWithin, fence.Sub(now))
	if apierrors.IsConflict(err) && ctx.Err() == nil {
		r.log.Debug("answering a handover request conflicted; reading the lock", zap.Error(err))
		return nil, nil
	}
	return h, err
}

// CarriesFence reports whether the accepted request h carries a fence
// that covers wait, the time this holder's work would still have to wait:
// then the holder names the candidate at once, and the candidate waits out
// the fence (lockmeta.Handover.FenceMillis). False without such a request,
// or when the fence has moved later since the answer; the holder then
// names the candidate at its fence.
func (r Role) CarriesFence(h *lockmeta.Handover, wait time.Duration) bool {
	if !r.On() || h == nil || !h.HonoursFence || time.Duration(h.FenceMillis)*time.Millisecond < wait {
		return false
	}
	r.log.Info("handing over before the fence; the successor's work waits it out",
		zap.String("candidate", h.Candidate), zap.Duration("fenceIn", wait))
	return true
}

// CarriedFence is for a candidate that finds a record naming it in place of
// another holder's (named is true): the later of fence and now plus the
// fence the handover annotation carries to it; fence otherwise. The
// annotation is the one of the object version that carries the record.
func (r Role) CarriedFence(fence, now time.Time, named bool) time.Time {
	if !named || !r.On() {
		return fence
	}
	h := r.hl.Handover()
	if h.Holder != r.hl.Identity() || h.FenceMillis <= 0 {
		return fence
	}
	if at := now.Add(time.Duration(h.FenceMillis) * time.Millisecond); at.After(fence) {
		return at
	}
	return fence
}

// Promised returns the request this holder accepted and has not yet
// honoured, when the lock still names this holder and the request is
// fresh and still entitled; nil otherwise.
func (r Role) Promised(now time.Time) *lockmeta.Handover {
	if h := r.Successor(now); h != nil && h.Answer == lockmeta.AnswerAccepted {
		return h
	}
	return nil
}

// Stands reports whether the handover h that a holder ending its term is
// about to write still stands: a coordinator's or directed successor (no
// request time) always does; a request does while the lock object last
// seen still carries it.
func (r Role) Stands(h lockmeta.Handover) bool {
	if h.RequestTime == nil {
		return true
	}
	cur := r.hl.Handover()
	return cur.Candidate == h.Candidate && cur.CandidateKey == h.CandidateKey
}

// StopWithin is what the holder promises in an accepted answer at now: its
// work stops within StopTimeout, and the record naming the candidate is
// written within a RetryPeriod after; a holder that took the lock by force
// and has not started its work hands over at its fence instead; never
// more than the lease. Validation makes StopTimeout + RetryPeriod shorter
// than the lease.
func (r Role) StopWithin(fence, now time.Time) time.Duration {
	within := r.t.StopTimeout + r.t.RetryPeriod
	return min(max(within, fence.Sub(now)), r.t.LeaseDuration)
}

// NamedSince is for a candidate that asked at askedAt and finds the record
// rec naming it: when the holder handed the lock over on its request, it
// may lead on that record alone, without writing its own first, and count
// its term from the returned time. ok is false when it must write first.
// lease is the lease of rec that candidates honour; held is true when the
// candidate may not lead on another's write (its fence has not passed, or
// it is in session mode).
//
// The record naming this candidate was written over a version of the lock
// object that carried its request, so it was sent after the request was:
// every other candidate times its lease from a moment after askedAt, and a
// term whose renew deadline counts from askedAt ends inside that lease, as
// one counted from a renew this candidate sent itself would. The old holder
// wrote it only after its work had stopped, as it writes every handover.
// The record must also promise at least this candidate's own lease and
// carry its key (otherwise others would time a shorter lease, or see
// another key, than this candidate's renewals assume); and the request
// must be recent, so that the term has time to renew before its deadline.
// In session mode the record must name this candidate's session, which a
// record written by the old holder does not: there it writes first.
func (r Role) NamedSince(askedAt time.Time, rec *resourcelock.Record, lease time.Duration, now time.Time, held bool) (since time.Time, ok bool) {
	switch {
	case !r.On() || askedAt.IsZero() || now.Sub(askedAt) >= r.t.RenewDeadline/2:
		return time.Time{}, false
	case rec.HolderKey != r.hl.Key() || lease < r.t.LeaseDuration:
		return time.Time{}, false
	case held:
		return time.Time{}, false
	}
	return askedAt, true
}

// SuccessorRecord is the record that ends prev's term at now: released
// (no holder, a one-second lease), or naming h's candidate with a lease of
// leaseSeconds.
func SuccessorRecord(prev resourcelock.Record, h lockmeta.Handover, leaseSeconds int, now time.Time) resourcelock.Record {
	next := resourcelock.Record{
		LeaseDurationSeconds: 1,
		LeaderTransitions:    prev.LeaderTransitions,
		AcquireTime:          metav1.NewTime(now),
		RenewTime:            metav1.NewTime(now),
	}
	if h.Candidate != "" {
		next.HolderIdentity = h.Candidate
		next.HolderKey = h.CandidateKey
		next.LeaseDurationSeconds = leaseSeconds
		next.LeaderTransitions++
	}
	return next
}
