package elector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// releaseAttempts bounds how often a release or handover is retried after
// conflicts.
const releaseAttempts = 3

// MaxLeaseDuration caps the lease a candidate honours from a record written
// by another holder. A holder that wrote a lease of ten years and died would
// otherwise block the election for ten years; with the cap the others take
// over an hour after they last saw it renew. Any holder whose renew deadline
// is under an hour stays safe: istiod writes 30s, client-go's default is 15s.
// A record over the cap is reported once per holder with a warning event.
const MaxLeaseDuration = time.Hour

// expirySlack is added to a computed expiry so that the wake-up lands after
// it, not on it.
const expirySlack = time.Millisecond

// Event reasons recorded on the lock object.
const (
	ReasonLeaderElection = "LeaderElection"
	ReasonCorruptRecord  = "CorruptLeaderRecord"
	ReasonLeaseTooLong   = "LeaseDurationTooLong"
)

// LeaderElector runs one candidate of one election. Create it with New.
type LeaderElector struct {
	cfg     Config
	log     *zap.Logger
	clock   clock.WithTicker
	metrics Metrics
	trigger chan struct{}

	// watch is set when Config.Watch is; see watch.go.
	watch *lockWatch
	// handover is set when cooperative preemption is on.
	handover resourcelock.HandoverLock

	// Used only by the goroutine running Run.
	requestFor  string    // the holder's term (termKey) a pending handover request applies to
	requestAt   time.Time // when this candidate first saw that request pending
	requestedBy string    // the candidate of the request pending then ("" if none)
	acquiredAt  time.Time // when the attempt that won the current term started

	mu              sync.Mutex
	leading         bool
	observedRecord  resourcelock.Record
	observedRaw     []byte
	observedVersion string
	observedTime    time.Time
	observedCorrupt bool
	reportedLeader  string
	warnedLease     string // holder and lease of the last over-long lease reported
	lastErr         error
}

// New validates cfg and returns an elector. It does not talk to the API
// server until Run.
func New(cfg Config) (*LeaderElector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	le := &LeaderElector{
		cfg:     cfg,
		log:     cfg.Logger,
		clock:   cfg.Clock,
		metrics: cfg.Metrics,
		trigger: make(chan struct{}, 1),
	}
	if le.log == nil {
		le.log = zap.NewNop()
	}
	le.log = le.log.With(zap.String("election", cfg.Name), zap.String("lock", cfg.Lock.Describe()),
		zap.String("identity", cfg.Lock.Identity()))
	if le.clock == nil {
		le.clock = clock.RealClock{}
	}
	if le.metrics == nil {
		le.metrics = noopMetrics{}
	}
	if cfg.Watch {
		le.watch = newLockWatch(le, cfg.Lock.(resourcelock.Watchable))
	}
	if cfg.HandoverGrace > 0 {
		le.handover = cfg.Lock.(resourcelock.HandoverLock)
	}
	return le, nil
}

// Run takes part in the election until ctx is cancelled or one term of
// leadership has ended, whichever comes first. It returns only after the
// OnStartedLeading callback and the watch it started have returned. Run may
// be called again after it returns, to contend for another term; it must not
// be called concurrently with itself.
func (le *LeaderElector) Run(ctx context.Context) {
	if le.watch != nil {
		stop := le.watch.start(ctx)
		defer stop()
	}
	if !le.acquire(ctx) {
		if le.cfg.ReleaseOnCancel {
			le.withdraw()
		}
		return
	}
	le.lead(ctx)
}

// IsLeader reports whether this candidate is in a term of leadership.
func (le *LeaderElector) IsLeader() bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.leading
}

// GetLeader returns the holder identity last observed in the record ("" when
// unknown or released).
func (le *LeaderElector) GetLeader() string {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.observedRecord.HolderIdentity
}

// Observed returns the record last observed and when it was observed.
func (le *LeaderElector) Observed() (resourcelock.Record, time.Time) {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.observedRecord, le.observedTime
}

// LastError returns the error of the latest attempt to acquire or renew, or
// nil when it succeeded or found the lock held by another candidate. It tells
// why a candidate cannot lead (for example missing RBAC permissions).
func (le *LeaderElector) LastError() error {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.lastErr
}

// Trigger makes a waiting candidate try to acquire at once instead of at its
// next retry, for example because the key comparison may have changed. It
// never blocks.
func (le *LeaderElector) Trigger() {
	select {
	case le.trigger <- struct{}{}:
	default:
	}
}

// Check returns an error when this candidate leads but has not renewed for
// longer than LeaseDuration + tolerance, which means others may already lead.
// Followers are always healthy.
func (le *LeaderElector) Check(tolerance time.Duration) error {
	le.mu.Lock()
	defer le.mu.Unlock()
	if !le.leading {
		return nil
	}
	if since := le.clock.Since(le.observedTime); since > le.cfg.LeaseDuration+tolerance {
		return fmt.Errorf("%s: leader has not renewed for %v (lease %v, tolerance %v)",
			le.cfg.Lock.Describe(), since.Round(time.Millisecond), le.cfg.LeaseDuration, tolerance)
	}
	return nil
}

// acquire tries until the lock is taken (true) or ctx ends (false).
func (le *LeaderElector) acquire(ctx context.Context) bool {
	le.log.Debug("contending for leadership")
	tryNow := true
	for {
		if tryNow {
			started := le.clock.Now()
			outcome, err := le.attempt(ctx, false)
			le.setLastError(err)
			switch outcome {
			case acquired:
				le.acquiredAt = started
				le.log.Info("acquired leadership")
				return true
			case failed:
				le.log.Warn("could not try to acquire the lock", zap.Error(err))
			}
		}
		timer := le.clock.NewTimer(le.followerWait())
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C():
			tryNow = true
		case <-le.trigger:
			timer.Stop()
			tryNow = true
		case <-le.watchEvents():
			timer.Stop()
			tryNow = le.watch.ingest() && le.worthTrying()
		}
	}
}

// followerWait is how long a follower sleeps before its next attempt when
// nothing happens meanwhile. Polling, it is the jittered retry period; with a
// working watch, it is the time until the lease (or a handover grace) runs
// out by this candidate's observation.
func (le *LeaderElector) followerWait() time.Duration {
	poll := wait.Jitter(le.cfg.RetryPeriod, JitterFactor)
	if le.watch == nil || !le.watch.healthy() {
		return poll
	}
	le.mu.Lock()
	rec, seen, corrupt := le.observedRecord, le.observedTime, le.observedCorrupt
	le.mu.Unlock()
	if seen.IsZero() || (rec.HolderIdentity == "" && !corrupt) {
		return poll // nothing known, or free and the last attempt failed
	}
	lease := le.cfg.LeaseDuration
	if !corrupt {
		lease = honouredLease(rec)
	}
	deadline := seen.Add(lease)
	if le.requestFor == termKey(&rec) {
		if graceEnd := le.requestAt.Add(le.cfg.HandoverGrace); graceEnd.Before(deadline) {
			deadline = graceEnd
		}
	}
	if left := deadline.Sub(le.clock.Now()); left > 0 {
		return left + expirySlack
	}
	// The lock could already be taken, so the attempt that just ended failed
	// (or lost a race): retry at the polling pace, not at once, which would
	// hammer an API server that refuses the write.
	return poll
}

// worthTrying reports whether the record last observed may let this
// candidate acquire now: it is free, names this candidate, has expired, or is
// held by a holder the key comparison lets it take from. A corrupt record is
// left to the expiry timer.
func (le *LeaderElector) worthTrying() bool {
	le.mu.Lock()
	rec, corrupt := le.observedRecord, le.observedCorrupt
	le.mu.Unlock()
	switch {
	case corrupt:
		return false // the expiry timer decides
	case rec.HolderIdentity == "" || rec.HolderIdentity == le.cfg.Lock.Identity():
		return true
	case !le.leaseValid(le.clock.Now()):
		return true
	default:
		return le.cfg.KeyComparison != nil && le.cfg.KeyComparison(rec.HolderKey)
	}
}

// lead runs one term: starts the callback, renews until the term ends, stops
// the callback, and then hands the lock over or releases it as appropriate.
func (le *LeaderElector) lead(ctx context.Context) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	le.setLeading(true)
	le.metrics.Acquired(le.cfg.Name)
	le.cfg.Lock.RecordEvent(corev1.EventTypeNormal, ReasonLeaderElection, le.cfg.Lock.Identity()+" became leader")

	done := make(chan struct{})
	go func() {
		defer close(done)
		le.cfg.Callbacks.OnStartedLeading(runCtx)
	}()

	end := le.renew(ctx)
	le.setLeading(false)
	cancel()
	le.waitStopped(done)
	switch {
	case end.handTo != nil:
		le.handOver(*end.handTo)
	case end.stillHeld && le.cfg.ReleaseOnCancel:
		le.release()
	case !end.stillHeld:
		le.metrics.Lost(le.cfg.Name)
	}
	le.cfg.Lock.RecordEvent(corev1.EventTypeNormal, ReasonLeaderElection, le.cfg.Lock.Identity()+" stopped leading")
	<-done
	if le.cfg.Callbacks.OnStoppedLeading != nil {
		le.cfg.Callbacks.OnStoppedLeading()
	}
}

// waitStopped waits up to StopTimeout for the callback to return.
func (le *LeaderElector) waitStopped(done <-chan struct{}) {
	if le.cfg.StopTimeout <= 0 {
		return
	}
	timer := le.clock.NewTimer(le.cfg.StopTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C():
		le.log.Warn("run functions did not stop in time; continuing without them",
			zap.Duration("stopTimeout", le.cfg.StopTimeout))
	}
}

// termEnd says how a term ended.
type termEnd struct {
	// stillHeld: the record still names this candidate (ctx was cancelled).
	stillHeld bool
	// handTo: a candidate asked for the lock and this holder agreed.
	handTo *resourcelock.Handover
}

// renew keeps the lock until ctx is cancelled, the term is lost (another
// holder appeared, or no renew succeeded for RenewDeadline), or a candidate
// asks for the lock and is granted it.
func (le *LeaderElector) renew(ctx context.Context) termEnd {
	// The deadline counts from when the last successful write was sent, not
	// from when its answer came back: the API server stored it at some point
	// in between, and followers time the lease from when they see it, so a
	// slow answer must not stretch the term beyond what they allow.
	lastRenew := le.acquiredAt
	timer := le.clock.NewTimer(le.nextRenew(lastRenew))
	defer timer.Stop()
	// A request may already wait: one addressed to this candidate while the
	// previous holder was handing the lock to it.
	answerNow := le.requestPending()
	for {
		if !answerNow {
			select {
			case <-ctx.Done():
				return termEnd{stillHeld: true}
			case <-timer.C():
			case <-le.watchEvents():
				if !le.watch.ingest() {
					continue
				}
				if holder := le.GetLeader(); holder != le.cfg.Lock.Identity() {
					le.log.Info("another holder took the lock; stopping leadership at once", zap.String("holder", holder))
					return termEnd{}
				}
				if !le.requestPending() {
					continue
				}
				// A candidate asks for the lock: answer now, not at the next renew.
				timer.Stop()
			}
		}
		answerNow = false
		remaining := le.cfg.RenewDeadline - le.clock.Since(lastRenew)
		if remaining <= 0 {
			le.log.Warn("renew deadline passed; stopping leadership", zap.Duration("renewDeadline", le.cfg.RenewDeadline))
			return termEnd{}
		}
		sent := le.clock.Now()
		attemptCtx, cancel := context.WithTimeout(ctx, remaining)
		outcome, err := le.attempt(attemptCtx, true)
		cancel()
		le.setLastError(err)
		switch outcome {
		case acquired:
			lastRenew = sent
		case heldByOther:
			le.log.Info("another holder took the lock; stopping leadership at once", zap.String("holder", le.GetLeader()))
			return termEnd{}
		case handOff:
			h := le.handover.Handover()
			le.log.Info("handing the lock over on request", zap.String("candidate", h.Candidate), zap.String("candidateKey", h.CandidateKey))
			return termEnd{stillHeld: true, handTo: &h}
		case failed:
			if ctx.Err() != nil {
				return termEnd{stillHeld: true}
			}
			le.metrics.RenewFailed(le.cfg.Name)
			le.log.Warn("failed to renew", zap.Error(err))
		}
		timer.Reset(le.nextRenew(lastRenew))
	}
}

// nextRenew is the wait before the next renew: RetryPeriod, but never past
// the renew deadline, so that a leader whose renewals keep failing ends its
// term RenewDeadline after its last successful renew, not up to a
// RetryPeriod later. The clock-skew tolerance, LeaseDuration -
// RenewDeadline, depends on it.
//
// When less than a RetryPeriod is left (the write that won the term took a
// long time, or renewals failed), the next attempt comes at half the time
// left, so that there is still a renew before the deadline; only in the last
// quarter of a RetryPeriod does the elector just wait for the deadline.
func (le *LeaderElector) nextRenew(lastRenew time.Time) time.Duration {
	left := le.cfg.RenewDeadline - le.clock.Since(lastRenew)
	switch {
	case left <= 0:
		return 0
	case left > le.cfg.RetryPeriod:
		return le.cfg.RetryPeriod
	case left > le.cfg.RetryPeriod/4:
		return left / 2
	default:
		return left
	}
}

// requestPending reports whether the lock object last seen carries a
// handover request addressed to this holder.
func (le *LeaderElector) requestPending() bool {
	return le.handover != nil && le.handover.Handover().Requested(le.cfg.Lock.Identity())
}

// answerRequest answers a pending handover request, if there is one
// (answered). An entitled candidate is granted the lock (handOff); any other
// request is cleared, so that its candidate stops waiting for an answer and
// the next candidate can ask.
func (le *LeaderElector) answerRequest(ctx context.Context) (out outcome, err error, answered bool) {
	if !le.requestPending() {
		return 0, nil, false
	}
	h := le.handover.Handover()
	if le.cfg.AcceptHandover != nil && le.cfg.AcceptHandover(h.CandidateKey) {
		return handOff, nil, true
	}
	le.metrics.Request(le.cfg.Name, "update")
	if err := le.handover.RequestHandover(ctx, resourcelock.Handover{Holder: le.cfg.Lock.Identity()}); err != nil {
		return failed, fmt.Errorf("refuse the handover request of %s: %w", h.Candidate, err), true
	}
	le.log.Info("refused a handover request from a candidate that is not entitled",
		zap.String("candidate", h.Candidate), zap.String("candidateKey", h.CandidateKey))
	return 0, nil, false
}

type outcome int

const (
	acquired    outcome = iota // the lock is ours now (taken or renewed)
	heldByOther                // someone else holds it and we may not take it (yet)
	failed                     // the API call failed; state unknown
	handOff                    // (leader only) a candidate asked for the lock and we agree
)

// attempt makes one try to take or renew the lock. A follower with a working
// watch decides from the object the watch delivered and reads from the API
// server only after its write conflicts.
func (le *LeaderElector) attempt(ctx context.Context, renewing bool) (outcome, error) {
	if !renewing {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, le.cfg.RenewDeadline)
		defer cancel()
	}
	me := le.cfg.Lock.Identity()
	if renewing {
		if out, err, answered := le.answerRequest(ctx); answered {
			return out, err
		}
		// Fast path: overwrite the object version last written or seen. If
		// anyone else wrote since, the update conflicts and we read below.
		if prev, _ := le.Observed(); prev.HolderIdentity == me {
			now := le.clock.Now()
			desired := le.desired(now)
			desired.AcquireTime = prev.AcquireTime
			desired.LeaderTransitions = prev.LeaderTransitions
			err := le.update(ctx, desired)
			if err == nil {
				le.observeOwnWrite(desired, now)
				return acquired, nil
			}
			if ctx.Err() != nil {
				return failed, err
			}
			le.metrics.SlowPath(le.cfg.Name)
			le.log.Debug("renew without read failed; reading the lock", zap.Error(err))
		}
	}

	fromCache := !renewing && le.watch != nil && le.watch.healthy()
	for {
		now := le.clock.Now()
		var (
			rec *resourcelock.Record
			raw []byte
			err error
		)
		if fromCache {
			rec, raw, err = le.watch.lock.Peek()
			if errors.Is(err, resourcelock.ErrNotInitialized) {
				fromCache = false
				continue
			}
		} else {
			rec, raw, err = le.get(ctx)
		}
		switch {
		case apierrors.IsNotFound(err):
			if !renewing && le.holderMayBeWorking(now) {
				// Deleted, not released: its holder may still be working.
				return heldByOther, nil
			}
			desired := le.desired(now)
			if err := le.create(ctx, desired); err != nil {
				return failed, fmt.Errorf("create %s: %w", le.cfg.Lock.Describe(), err)
			}
			le.observeOwnWrite(desired, now)
			return acquired, nil
		case errors.Is(err, resourcelock.ErrCorruptRecord):
			out, err := le.overwriteCorrupt(ctx, renewing, raw, err, now)
			if fromCache && apierrors.IsConflict(err) {
				fromCache = false
				continue
			}
			return out, err
		case err != nil:
			return failed, fmt.Errorf("get %s: %w", le.cfg.Lock.Describe(), err)
		}
		le.observe(rec, raw, now)

		out, err := le.decideAndWrite(ctx, renewing, rec, now)
		if fromCache && apierrors.IsConflict(err) {
			// The watch had not delivered the latest version yet.
			fromCache = false
			continue
		}
		return out, err
	}
}

// decideAndWrite applies the election rules to the record just read and
// writes this candidate's record when they allow it.
func (le *LeaderElector) decideAndWrite(ctx context.Context, renewing bool, rec *resourcelock.Record, now time.Time) (outcome, error) {
	me := le.cfg.Lock.Identity()
	desired := le.desired(now)
	stealing := false
	if rec.HolderIdentity != me {
		if renewing {
			// The record is not ours any more: someone took or cleared it.
			return heldByOther, nil
		}
		if rec.HolderIdentity != "" && le.leaseValid(now) {
			if le.cfg.KeyComparison == nil || !le.cfg.KeyComparison(rec.HolderKey) {
				return heldByOther, nil
			}
			if out, err, wait := le.askForHandover(ctx, rec, now); wait {
				return out, err
			}
			stealing = true
		}
		desired.LeaderTransitions = rec.LeaderTransitions + 1
	} else {
		if renewing {
			if out, err, answered := le.answerRequest(ctx); answered {
				return out, err
			}
		}
		desired.AcquireTime = rec.AcquireTime
		desired.LeaderTransitions = rec.LeaderTransitions
	}

	if err := le.update(ctx, desired); err != nil {
		return failed, fmt.Errorf("update %s: %w", le.cfg.Lock.Describe(), err)
	}
	le.observeOwnWrite(desired, now)
	if stealing {
		le.metrics.Stole(le.cfg.Name)
		msg := fmt.Sprintf("%s took the lock from %s (key %q)", me, rec.HolderIdentity, rec.HolderKey)
		le.log.Info("took the lock from a lower-priority holder", zap.String("holder", rec.HolderIdentity), zap.String("holderKey", rec.HolderKey))
		le.cfg.Lock.RecordEvent(corev1.EventTypeNormal, ReasonLeaderElection, msg)
	}
	return acquired, nil
}

// askForHandover is the cooperative half of a steal. When the holder honours
// handover requests, the first time this candidate finds itself entitled it
// writes a request (unless another candidate's is already pending) and waits;
// it returns wait=false, meaning "take the lock by force", only once
// HandoverGrace has passed without the holder handing over.
func (le *LeaderElector) askForHandover(ctx context.Context, rec *resourcelock.Record, now time.Time) (outcome, error, bool) {
	if le.handover == nil {
		return 0, nil, false
	}
	h := le.handover.Handover()
	if h.Holder != rec.HolderIdentity {
		return 0, nil, false // an istiod or client-go holder: it cannot answer
	}
	me := le.cfg.Lock.Identity()
	// A pending request of a candidate that this one outranks is replaced,
	// so that the lock moves once, to the best candidate, instead of twice.
	outranksPending := h.Requested(rec.HolderIdentity) && h.Candidate != me &&
		le.cfg.KeyComparison != nil && le.cfg.KeyComparison(h.CandidateKey)
	if le.requestFor == termKey(rec) && !(outranksPending && le.requestedBy != h.Candidate) {
		if now.Before(le.requestAt.Add(le.cfg.HandoverGrace)) {
			return heldByOther, nil, true
		}
		le.log.Warn("holder did not hand over within the grace period; taking the lock",
			zap.String("holder", rec.HolderIdentity), zap.Duration("grace", le.cfg.HandoverGrace))
		return 0, nil, false
	}
	if !h.Requested(rec.HolderIdentity) || outranksPending {
		req := resourcelock.Handover{
			Holder:       rec.HolderIdentity,
			Candidate:    me,
			CandidateKey: le.cfg.Lock.Key(),
			RequestTime:  &metav1.Time{Time: now},
		}
		le.metrics.Request(le.cfg.Name, "update")
		if err := le.handover.RequestHandover(ctx, req); err != nil {
			return failed, fmt.Errorf("ask %s to hand over %s: %w", rec.HolderIdentity, le.cfg.Lock.Describe(), err), true
		}
		le.metrics.HandoverRequested(le.cfg.Name)
		le.log.Info("asked the holder to hand over", zap.String("holder", rec.HolderIdentity), zap.String("holderKey", rec.HolderKey))
	}
	le.requestFor, le.requestAt, le.requestedBy = termKey(rec), now, h.Candidate
	return heldByOther, nil, true
}

// termKey names one holder's term: every change of holder increments
// leaderTransitions, so a holder that regains the lock is in a new term even
// within the same second. A handover request is about a term.
func termKey(rec *resourcelock.Record) string {
	return fmt.Sprintf("%s#%d", rec.HolderIdentity, rec.LeaderTransitions)
}

// desired is the record this candidate writes when it takes the lock now.
func (le *LeaderElector) desired(now time.Time) resourcelock.Record {
	return resourcelock.Record{
		HolderIdentity:       le.cfg.Lock.Identity(),
		HolderKey:            le.cfg.Lock.Key(),
		LeaseDurationSeconds: le.leaseSeconds(),
		AcquireTime:          metav1.NewTime(now),
		RenewTime:            metav1.NewTime(now),
	}
}

// overwriteCorrupt handles a record that cannot be decoded. A follower
// treats it as held by an unknown holder that expires LeaseDuration after the
// bytes were first seen; a leader repairs it at once, since whoever broke it
// cannot be a holder that this elector would recognise.
func (le *LeaderElector) overwriteCorrupt(ctx context.Context, renewing bool, raw []byte, cause error, now time.Time) (outcome, error) {
	firstSeen, prev := le.observeCorrupt(raw, cause, now)
	if !renewing && now.Before(firstSeen.Add(le.cfg.LeaseDuration)) {
		return heldByOther, nil
	}
	desired := le.desired(now)
	if renewing && prev.HolderIdentity == desired.HolderIdentity {
		desired.AcquireTime = prev.AcquireTime
		desired.LeaderTransitions = prev.LeaderTransitions
	} else {
		desired.LeaderTransitions = prev.LeaderTransitions + 1
	}
	if err := le.update(ctx, desired); err != nil {
		return failed, fmt.Errorf("replace corrupt record in %s: %w", le.cfg.Lock.Describe(), err)
	}
	le.observeOwnWrite(desired, now)
	return acquired, nil
}

// observeCorrupt notes undecodable record bytes, warning once per new
// content. It returns when they were first seen and the last good record.
func (le *LeaderElector) observeCorrupt(raw []byte, cause error, now time.Time) (time.Time, resourcelock.Record) {
	le.mu.Lock()
	changed := !le.observedCorrupt || !bytes.Equal(raw, le.observedRaw)
	prev := le.observedRecord
	if changed {
		le.observedCorrupt = true
		le.observedRaw = raw
		le.observedVersion = le.cfg.Lock.ResourceVersion()
		le.observedTime = now
	}
	firstSeen := le.observedTime
	le.mu.Unlock()
	if changed {
		le.log.Warn("lock holds a corrupt record; it will be replaced", zap.Error(cause))
		le.cfg.Lock.RecordEvent(corev1.EventTypeWarning, ReasonCorruptRecord,
			fmt.Sprintf("%v; treated as expired after %v", cause, le.cfg.LeaseDuration))
	}
	return firstSeen, prev
}

// release writes an empty holder with a one-second lease so that others may
// take the lock at once. It retries after conflicts as long as the record is
// still ours.
func (le *LeaderElector) release() {
	le.writeSuccessor(resourcelock.Handover{}, "released the lock")
}

// withdraw is how a candidate that stops without leading leaves: if it
// asked for a handover, it takes the request back, and if the holder has
// already handed it the lock, it releases the lock, so that nobody waits out
// a lease that no one renews.
func (le *LeaderElector) withdraw() {
	me := le.cfg.Lock.Identity()
	if le.requestFor == "" && le.GetLeader() != me {
		return // never asked, never named: nothing to undo
	}
	ctx, cancel := context.WithTimeout(context.Background(), le.cfg.RenewDeadline)
	defer cancel()
	for i := 0; i < releaseAttempts; i++ {
		rec, raw, err := le.get(ctx)
		if err != nil {
			le.log.Warn("could not read the lock to withdraw", zap.Error(err))
			return
		}
		le.observe(rec, raw, le.clock.Now())
		if rec.HolderIdentity == me {
			le.release()
			return
		}
		if le.handover == nil {
			return
		}
		h := le.handover.Handover()
		if h.Candidate != me {
			return
		}
		le.metrics.Request(le.cfg.Name, "update")
		err = le.handover.RequestHandover(ctx, resourcelock.Handover{Holder: h.Holder})
		if err == nil {
			le.log.Info("withdrew the handover request")
			return
		}
		if !apierrors.IsConflict(err) {
			le.log.Warn("could not withdraw the handover request", zap.Error(err))
			return
		}
	}
}

// handOver writes the record naming the candidate that asked for the lock,
// so that it, and only it, takes over at once.
func (le *LeaderElector) handOver(h resourcelock.Handover) {
	if le.writeSuccessor(h, "handed the lock over") {
		le.metrics.HandedOver(le.cfg.Name)
		le.cfg.Lock.RecordEvent(corev1.EventTypeNormal, ReasonLeaderElection,
			fmt.Sprintf("%s handed the lock over to %s (key %q)", le.cfg.Lock.Identity(), h.Candidate, h.CandidateKey))
	}
}

// writeSuccessor ends this holder's record: with an empty Handover it
// releases the lock (empty holder, one-second lease); otherwise it names the
// candidate h.Candidate as holder. It returns whether the write happened.
func (le *LeaderElector) writeSuccessor(h resourcelock.Handover, done string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), le.cfg.RenewDeadline)
	defer cancel()
	for i := 0; i < releaseAttempts; i++ {
		prev, _ := le.Observed()
		if prev.HolderIdentity != le.cfg.Lock.Identity() {
			return false
		}
		now := le.clock.Now()
		next := resourcelock.Record{
			LeaseDurationSeconds: 1,
			LeaderTransitions:    prev.LeaderTransitions,
			AcquireTime:          metav1.NewTime(now),
			RenewTime:            metav1.NewTime(now),
		}
		if h.Candidate != "" {
			next.HolderIdentity = h.Candidate
			next.HolderKey = h.CandidateKey
			next.LeaseDurationSeconds = le.leaseSeconds()
			next.LeaderTransitions++
		}
		err := le.update(ctx, next)
		if err == nil {
			le.observeOwnWrite(next, now)
			le.log.Info(done, zap.String("successor", h.Candidate))
			return true
		}
		if !apierrors.IsConflict(err) {
			le.log.Warn("could not end the term cleanly", zap.String("successor", h.Candidate), zap.Error(err))
			return false
		}
		rec, raw, err := le.get(ctx)
		if err != nil {
			le.log.Warn("failed to read the lock after a conflict", zap.Error(err))
			return false
		}
		le.observe(rec, raw, now)
		if h.Candidate != "" {
			if cur := le.handover.Handover(); cur.Candidate != h.Candidate || cur.CandidateKey != h.CandidateKey {
				le.log.Info("the handover request changed; releasing instead")
				h = resourcelock.Handover{}
			}
		}
	}
	le.log.Warn("gave up ending the term after repeated conflicts", zap.Int("attempts", releaseAttempts))
	return false
}

// get, create and update call the lock and count the request.
func (le *LeaderElector) get(ctx context.Context) (*resourcelock.Record, []byte, error) {
	le.metrics.Request(le.cfg.Name, "get")
	return le.cfg.Lock.Get(ctx)
}

func (le *LeaderElector) create(ctx context.Context, r resourcelock.Record) error {
	le.metrics.Request(le.cfg.Name, "create")
	return le.cfg.Lock.Create(ctx, r)
}

func (le *LeaderElector) update(ctx context.Context, r resourcelock.Record) error {
	le.metrics.Request(le.cfg.Name, "update")
	return le.cfg.Lock.Update(ctx, r)
}

func (le *LeaderElector) setLastError(err error) {
	le.mu.Lock()
	le.lastErr = err
	le.mu.Unlock()
}

func (le *LeaderElector) setLeading(v bool) {
	le.mu.Lock()
	le.leading = v
	le.mu.Unlock()
	le.metrics.SetLeading(le.cfg.Name, v)
}

// leaseValid reports whether the observed record has not expired by now: it
// expires when observedTime + leaseDurationSeconds < now.
func (le *LeaderElector) leaseValid(now time.Time) bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	return !le.observedTime.Add(honouredLease(le.observedRecord)).Before(now)
}

// holderMayBeWorking reports whether, by this candidate's observation, the
// lock is held by another holder whose lease has not run out; a corrupt
// record counts as held for LeaseDuration from when it was first seen.
// Deleting the lock object does not end such a lease: the holder is not told
// and goes on working until it notices, so the lock is not free before the
// lease runs out (the holder itself recreates it at its next renew).
func (le *LeaderElector) holderMayBeWorking(now time.Time) bool {
	le.mu.Lock()
	rec, seen, corrupt := le.observedRecord, le.observedTime, le.observedCorrupt
	le.mu.Unlock()
	if corrupt {
		return now.Before(seen.Add(le.cfg.LeaseDuration))
	}
	return rec.HolderIdentity != "" && rec.HolderIdentity != le.cfg.Lock.Identity() && le.leaseValid(now)
}

// honouredLease is the lease of rec that candidates wait for, at most
// MaxLeaseDuration.
func honouredLease(rec resourcelock.Record) time.Duration {
	return time.Duration(min(rec.LeaseDurationSeconds, int(MaxLeaseDuration/time.Second))) * time.Second
}

// leaseSeconds is LeaseDuration in the whole seconds a record stores, rounded
// up: rounding down could tell others to wait less than the renew deadline
// (a lease of 1.9s with a deadline of 1.5s would read as 1s).
func (le *LeaderElector) leaseSeconds() int {
	return int((le.cfg.LeaseDuration + time.Second - 1) / time.Second)
}

// observe remembers rec if the lock changed since it was seen last. A change
// is new record bytes or a new object version: a holder that renews twice
// within a second writes the same bytes, but its writes still show it alive.
func (le *LeaderElector) observe(rec *resourcelock.Record, raw []byte, now time.Time) {
	version := le.cfg.Lock.ResourceVersion()
	le.mu.Lock()
	if !le.observedCorrupt && bytes.Equal(raw, le.observedRaw) && version == le.observedVersion && !le.observedTime.IsZero() {
		le.mu.Unlock()
		return
	}
	le.observedRecord = *rec
	le.observedRaw = raw
	le.observedVersion = version
	le.observedTime = now
	le.observedCorrupt = false
	le.mu.Unlock()
	le.reportLeader(rec.HolderIdentity)
	le.warnLongLease(rec)
}

// warnLongLease reports, once per holder and lease, a record whose lease is
// longer than MaxLeaseDuration.
func (le *LeaderElector) warnLongLease(rec *resourcelock.Record) {
	if rec.LeaseDurationSeconds <= int(MaxLeaseDuration/time.Second) {
		return
	}
	seen := fmt.Sprintf("%s/%d", rec.HolderIdentity, rec.LeaseDurationSeconds)
	if seen == le.warnedLease {
		return
	}
	le.warnedLease = seen
	le.log.Warn("the lock holder wrote a lease longer than the maximum; honouring only the maximum",
		zap.String("holder", rec.HolderIdentity), zap.Int("leaseDurationSeconds", rec.LeaseDurationSeconds), zap.Duration("max", MaxLeaseDuration))
	le.cfg.Lock.RecordEvent(corev1.EventTypeWarning, ReasonLeaseTooLong,
		fmt.Sprintf("%s wrote leaseDurationSeconds %d; candidates honour at most %v", rec.HolderIdentity, rec.LeaseDurationSeconds, MaxLeaseDuration))
}

// observeOwnWrite remembers a record this candidate just wrote.
func (le *LeaderElector) observeOwnWrite(rec resourcelock.Record, now time.Time) {
	le.mu.Lock()
	le.observedRecord = rec
	le.observedRaw = resourcelock.EncodeRecord(rec)
	le.observedVersion = le.cfg.Lock.ResourceVersion()
	le.observedTime = now
	le.observedCorrupt = false
	le.mu.Unlock()
	le.reportLeader(rec.HolderIdentity)
}

func (le *LeaderElector) reportLeader(identity string) {
	if identity == "" || identity == le.reportedLeader {
		return
	}
	le.reportedLeader = identity
	if le.cfg.Callbacks.OnNewLeader != nil {
		le.cfg.Callbacks.OnNewLeader(identity)
	}
}
