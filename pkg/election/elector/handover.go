package elector

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// handoverProtocol is cooperative preemption (docs/handover.md). A candidate
// entitled to the lock asks the holder in the handover annotation; the
// holder answers: it accepts with the time within which its work will have
// stopped, or it refuses. An accepted request ends the holder's term; once
// its work has stopped it writes the record naming the candidate. A refusal
// is an answer: the candidate does not take the lock by force, and asks
// again when it is told its comparison may have changed (Trigger) or when
// its request has grown older than a lease. Only a holder that gives no
// answer within HandoverGrace is preempted by force.
//
// All methods are called by the election loop only.
type handoverProtocol struct {
	le     *LeaderElector
	lock   lockcap.HandoverLock
	grace  time.Duration
	accept func(candidateKey string) bool

	// What this candidate knows about its request to one holder's term.
	term       string    // termKey of the holder asked
	askedAt    time.Time // when the request was written; zero: none in this term
	heard      string    // the answer seen, "" while pending
	answeredAt time.Time // when the answer was first seen
	askAgain   bool      // Trigger was called since the refusal
	// unanswered is when this candidate first asked in this term without
	// any answer since: a holder that clears requests as stale (its clock
	// a lease or more apart) is preempted once the grace has passed from
	// then, however often the candidate asked again.
	unanswered time.Time
	entitled   time.Time // when this candidate was first found entitled in this term
	// Another candidate's request this one defers to, and since when.
	other       string
	otherSeenAt time.Time
}

// askStep is what a candidate does after looking at the handover state.
type askStep int

const (
	waitForHolder askStep = iota // asked, or an answer is awaited or was given
	takeByForce                  // the holder cannot or did not answer
)

func newHandoverProtocol(le *LeaderElector, lock lockcap.HandoverLock) *handoverProtocol {
	return &handoverProtocol{le: le, lock: lock, grace: le.cfg.HandoverGrace, accept: le.cfg.AcceptHandover}
}

// ask is the candidate's side, called when this candidate is entitled to
// take rec from its holder now.
func (p *handoverProtocol) ask(ctx context.Context, rec *resourcelock.Record, now time.Time) (askStep, error) {
	h := p.lock.Handover()
	if h.Holder != rec.HolderIdentity {
		return takeByForce, nil // an istiod or client-go holder: it cannot answer
	}
	if t := termKey(rec); p.term != t {
		*p = handoverProtocol{le: p.le, lock: p.lock, grace: p.grace, accept: p.accept, term: t}
	}
	me := p.le.cfg.Lock.Identity()
	if !p.askedAt.IsZero() && h.Candidate == me && !p.mayAskAgain(h, now) {
		return p.followUp(h, now), nil
	}
	if p.deferToOther(h, now) {
		return waitForHolder, nil
	}
	if p.yielding(now) {
		return waitForHolder, nil
	}
	if p.heard == "" && !p.unanswered.IsZero() && !now.Before(p.unanswered.Add(p.grace)) {
		p.le.log.Warn("the holder cleared this candidate's requests without an answer for the grace period; taking the lock",
			zap.String("holder", h.Holder), zap.Duration("grace", p.grace))
		return takeByForce, nil
	}
	if !p.askedAt.IsZero() && now.Before(p.askedAt.Add(p.le.cfg.RetryPeriod)) {
		return waitForHolder, nil // at most one request per RetryPeriod
	}
	return waitForHolder, p.request(ctx, rec, now)
}

// followUp follows this candidate's own request.
func (p *handoverProtocol) followUp(h lockmeta.Handover, now time.Time) askStep {
	if h.Answer != "" && p.heard != h.Answer {
		p.heard, p.answeredAt = h.Answer, now
		p.le.log.Info("the holder answered the handover request", zap.String("holder", h.Holder),
			zap.String("answer", h.Answer), zap.Int64("stopWithinMillis", h.StopWithinMillis))
	}
	if h.Answer != "" || now.Before(p.askedAt.Add(p.grace)) {
		// Accepted: the holder stops its work and then names this
		// candidate; it is never preempted while it renews. Refused: the
		// candidate waits to be entitled again.
		return waitForHolder
	}
	p.le.log.Warn("the holder did not answer the handover request in time; taking the lock",
		zap.String("holder", h.Holder), zap.Duration("grace", p.grace))
	return takeByForce
}

// mayAskAgain reports whether a request may be repeated: a refused one
// after Trigger, or once the refusal is older than a lease; an accepted one
// once the holder has let the time it promised, and a RetryPeriod more,
// pass without naming this candidate (it crashed and came back under its
// identity, or its write failed and it went on renewing).
func (p *handoverProtocol) mayAskAgain(h lockmeta.Handover, now time.Time) bool {
	if h.Answer == "" {
		return false
	}
	if p.heard != h.Answer {
		p.followUp(h, now) // note the answer first
	}
	if h.Answer == lockmeta.AnswerAccepted {
		return !now.Before(p.promiseBroken(h))
	}
	return p.askAgain || !now.Before(p.answeredAt.Add(p.le.cfg.LeaseDuration))
}

// promiseBroken is when an accepted request that has not been honoured
// counts as broken: the promised stop, and a RetryPeriod for the write
// naming this candidate, after the answer was seen.
func (p *handoverProtocol) promiseBroken(h lockmeta.Handover) time.Time {
	return p.answeredAt.Add(time.Duration(h.StopWithinMillis)*time.Millisecond + p.le.cfg.RetryPeriod)
}

// deferToOther reports whether another candidate's live request should run
// its course first: one this candidate does not outrank, or one the holder
// accepted. A request left unanswered for longer than the grace period is
// not deferred to.
func (p *handoverProtocol) deferToOther(h lockmeta.Handover, now time.Time) bool {
	me := p.le.cfg.Lock.Identity()
	if !h.Requested(h.Holder) || h.Candidate == me || h.Answer == lockmeta.AnswerRefused || p.stale(h, now) {
		return false
	}
	if h.Answer == "" && p.le.cfg.KeyComparison != nil && p.le.cfg.KeyComparison(h.CandidateKey) {
		return false // this candidate outranks it: replace it, so the lock moves once
	}
	if p.other != h.Candidate {
		p.other, p.otherSeenAt = h.Candidate, now
	}
	return h.Answer == lockmeta.AnswerAccepted || now.Before(p.otherSeenAt.Add(p.grace))
}

// request writes this candidate's request.
func (p *handoverProtocol) request(ctx context.Context, rec *resourcelock.Record, now time.Time) error {
	le := p.le
	req := lockmeta.Handover{
		Holder:       rec.HolderIdentity,
		Candidate:    le.cfg.Lock.Identity(),
		CandidateKey: le.cfg.Lock.Key(),
		RequestTime:  &metav1.Time{Time: now},
	}
	if err := p.write(ctx, req); err != nil {
		return fmt.Errorf("ask %s to hand over %s: %w", rec.HolderIdentity, le.cfg.Lock.Describe(), err)
	}
	if p.unanswered.IsZero() || p.heard != "" {
		p.unanswered = now
	}
	p.askedAt, p.heard, p.answeredAt, p.askAgain = now, "", time.Time{}, false
	le.metrics.HandoverRequested(le.cfg.Name)
	le.log.Info("asked the holder to hand over", zap.String("holder", rec.HolderIdentity), zap.String("holderKey", rec.HolderKey))
	return nil
}

// yielding reports whether this candidate, entitled now, lets better
// candidates ask first: for its YieldOnRelease delay from when it was first
// found entitled in this term, before its first request. A default flip
// entitles every candidate of the new default at once; without it the
// first to ask would win and a better one take the lock from it again.
func (p *handoverProtocol) yielding(now time.Time) bool {
	if !p.askedAt.IsZero() {
		return false
	}
	if p.entitled.IsZero() {
		p.entitled = now
	}
	return now.Before(p.entitled.Add(p.le.yieldDelay()))
}

// triggered is called by the loop when Trigger was called: a refused
// request may be repeated at once.
func (p *handoverProtocol) triggered() { p.askAgain = true }

// wakeAt is when the candidate's handover state changes by itself: the end
// of the grace period of an unanswered request, or when a refusal may be
// repeated. Zero when nothing is waited for.
func (p *handoverProtocol) wakeAt() time.Time {
	switch {
	case p.askedAt.IsZero():
		if at := p.entitled.Add(p.le.yieldDelay()); !p.entitled.IsZero() && at.After(p.le.clock.Now()) {
			return at
		}
		if p.other != "" {
			return p.otherSeenAt.Add(p.grace)
		}
		return time.Time{}
	case p.heard == "":
		return p.unanswered.Add(p.grace)
	case p.heard == lockmeta.AnswerRefused:
		return p.answeredAt.Add(p.le.cfg.LeaseDuration)
	case p.heard == lockmeta.AnswerAccepted:
		// Look when the holder promised to name this candidate, and again
		// when the promise counts as broken; nothing once the annotation
		// no longer carries this candidate's accepted request (it was
		// handed the lock, or the holder's term moved on).
		h := p.lock.Handover()
		if h.Candidate != p.le.cfg.Lock.Identity() || h.Answer != lockmeta.AnswerAccepted {
			return time.Time{}
		}
		now := p.le.clock.Now()
		for _, at := range []time.Time{p.answeredAt.Add(time.Duration(h.StopWithinMillis) * time.Millisecond), p.promiseBroken(h)} {
			if at.After(now) {
				return at
			}
		}
	}
	return time.Time{}
}

// answer is the holder's side: it answers the request addressed to this
// holder, if there is one, and returns it when accepted. A request older
// than a lease is cleared without an answer; one from a candidate that
// AcceptHandover does not entitle now is refused (and accepted later if the
// candidate becomes entitled while the request is fresh).
func (p *handoverProtocol) answer(ctx context.Context, now time.Time) (*lockmeta.Handover, error) {
	le := p.le
	me := le.cfg.Lock.Identity()
	h := p.lock.Handover()
	if !h.Requested(me) {
		return nil, nil
	}
	// An accepted request seen by a holder that leads and is not stopping
	// is a promise it could not keep (its write naming the candidate
	// failed and it took the lock back): it is answered again, so that the
	// candidate is neither stranded on an old acceptance nor kept waiting
	// when the holder no longer agrees.
	if p.stale(h, now) {
		le.log.Info("ignoring a stale handover request", zap.String("candidate", h.Candidate), zap.Any("requestTime", h.RequestTime))
		return nil, p.write(ctx, lockmeta.Handover{Holder: me})
	}
	if p.accept == nil || !p.accept(h.CandidateKey) {
		if h.Answer == lockmeta.AnswerRefused {
			return nil, nil
		}
		h.Answer, h.AnswerTime = lockmeta.AnswerRefused, &metav1.Time{Time: now}
		le.log.Info("refused a handover request from a candidate that is not entitled",
			zap.String("candidate", h.Candidate), zap.String("candidateKey", h.CandidateKey))
		return nil, p.write(ctx, h)
	}
	h.Answer, h.AnswerTime = lockmeta.AnswerAccepted, &metav1.Time{Time: now}
	h.StopWithinMillis = p.stopWithin(now).Milliseconds()
	if err := p.write(ctx, h); err != nil {
		return nil, fmt.Errorf("accept the handover request of %s: %w", h.Candidate, err)
	}
	le.log.Info("accepted a handover request", zap.String("candidate", h.Candidate), zap.String("candidateKey", h.CandidateKey))
	return &h, nil
}

// namedSince is for a candidate that finds the record naming it: when the
// holder handed the lock over on its request, it may lead on that record
// alone, without writing its own first, and count its term from the
// returned time. ok is false when it must write first.
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
func (p *handoverProtocol) namedSince(rec *resourcelock.Record, now time.Time) (since time.Time, ok bool) {
	le := p.le
	switch {
	case p.askedAt.IsZero() || now.Sub(p.askedAt) >= le.cfg.RenewDeadline/2:
		return time.Time{}, false
	case rec.HolderKey != le.cfg.Lock.Key() || honouredLease(*rec) < le.cfg.LeaseDuration:
		return time.Time{}, false
	case le.startAt.After(now) || le.sessionMode():
		return time.Time{}, false
	}
	return p.askedAt, true
}

// promisedSuccessor returns the request this holder accepted and has not
// yet honoured, when the lock still names this holder and the request is
// fresh and still entitled; nil otherwise.
func (le *LeaderElector) promisedSuccessor(now time.Time) *lockmeta.Handover {
	p := le.handover
	if p == nil {
		return nil
	}
	h := p.lock.Handover()
	if !h.Requested(le.cfg.Lock.Identity()) || h.Answer != lockmeta.AnswerAccepted ||
		p.stale(h, now) || p.accept == nil || !p.accept(h.CandidateKey) {
		return nil
	}
	return &h
}

// reconsiders reports whether a leading holder must answer a fresh request
// again: one it refused whose candidate has become entitled, or one it
// accepted in a term whose end could not name the candidate.
func (p *handoverProtocol) reconsiders(now time.Time) bool {
	h := p.lock.Handover()
	if !h.Requested(p.le.cfg.Lock.Identity()) || p.stale(h, now) {
		return false
	}
	switch h.Answer {
	case lockmeta.AnswerAccepted:
		return true
	case lockmeta.AnswerRefused:
		return p.accept != nil && p.accept(h.CandidateKey)
	}
	return false
}

// successor returns the candidate this holder should hand the lock to when
// its term ends for another reason: a fresh request from a candidate that is
// entitled now. Nil when there is none.
func (p *handoverProtocol) successor(now time.Time) *lockmeta.Handover {
	h := p.lock.Handover()
	if !h.Requested(p.le.cfg.Lock.Identity()) || p.stale(h, now) || p.accept == nil || !p.accept(h.CandidateKey) {
		return nil
	}
	return &h
}

// stopWithin is what the holder promises in an accepted answer: its work
// stops within StopTimeout, and the record naming the candidate is written
// within a RetryPeriod after; a holder that took the lock by force and has
// not started its work hands over at its fence instead; never more than
// the lease. Validation makes StopTimeout + RetryPeriod shorter than the
// lease.
func (p *handoverProtocol) stopWithin(now time.Time) time.Duration {
	within := p.le.cfg.StopTimeout + p.le.cfg.RetryPeriod
	return min(max(within, p.le.startAt.Sub(now)), p.le.cfg.LeaseDuration)
}

// stale reports whether a request is too old (or too far in the future) to
// act on: more than a lease away from now, or without a time.
func (p *handoverProtocol) stale(h lockmeta.Handover, now time.Time) bool {
	if h.RequestTime == nil {
		return true
	}
	age := now.Sub(h.RequestTime.Time)
	return age > p.le.cfg.LeaseDuration || -age > p.le.cfg.LeaseDuration
}

// write stores h in the annotation, counting the request.
func (p *handoverProtocol) write(ctx context.Context, h lockmeta.Handover) error {
	p.le.metrics.Request(p.le.cfg.Name, "update")
	return p.lock.RequestHandover(ctx, h)
}

// withdraw takes this candidate's request back when it stops contending. It
// returns whether the record names this candidate (the holder handed the
// lock to it meanwhile), in which case the caller releases the lock.
func (p *handoverProtocol) withdraw(ctx context.Context) bool {
	le := p.le
	me := le.cfg.Lock.Identity()
	for i := 0; i < releaseAttempts; i++ {
		rec, raw, err := le.get(ctx)
		if err != nil {
			le.log.Warn("could not read the lock to withdraw", zap.Error(err))
			return false
		}
		le.observe(rec, raw, le.clock.Now())
		if rec.HolderIdentity == me {
			return true
		}
		h := p.lock.Handover()
		if h.Candidate != me {
			return false
		}
		err = p.write(ctx, lockmeta.Handover{Holder: h.Holder})
		if err == nil {
			le.log.Info("withdrew the handover request")
			return false
		}
		if !apierrors.IsConflict(err) {
			le.log.Warn("could not withdraw the handover request", zap.Error(err))
			return false
		}
	}
	return false
}

// termKey names one holder's term: every change of holder increments
// leaderTransitions, so a holder that regains the lock is in a new term even
// within the same second. A handover request is about a term.
func termKey(rec *resourcelock.Record) string {
	return fmt.Sprintf("%s#%d", rec.HolderIdentity, rec.LeaderTransitions)
}
