package elector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
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

// releaseAttempts bounds how often a release is retried after conflicts.
const releaseAttempts = 3

// maxRecordLeaseSeconds caps the lease duration read from a record, so that a
// huge value cannot overflow time arithmetic.
const maxRecordLeaseSeconds = math.MaxInt32

// Event reasons recorded on the lock object.
const (
	ReasonLeaderElection = "LeaderElection"
	ReasonCorruptRecord  = "CorruptLeaderRecord"
)

// LeaderElector runs one candidate of one election. Create it with New.
type LeaderElector struct {
	cfg     Config
	log     *zap.Logger
	clock   clock.WithTicker
	metrics Metrics
	trigger chan struct{}

	mu              sync.Mutex
	leading         bool
	observedRecord  resourcelock.Record
	observedRaw     []byte
	observedVersion string
	observedTime    time.Time
	observedCorrupt bool
	reportedLeader  string
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
	return le, nil
}

// Run takes part in the election until ctx is cancelled or one term of
// leadership has ended, whichever comes first. It returns only after the
// OnStartedLeading callback it started has returned. Run may be called again
// after it returns, to contend for another term; it must not be called
// concurrently with itself.
func (le *LeaderElector) Run(ctx context.Context) {
	if !le.acquire(ctx) {
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
	for {
		outcome, err := le.attempt(ctx, false)
		le.setLastError(err)
		switch outcome {
		case acquired:
			le.log.Info("acquired leadership")
			return true
		case failed:
			le.log.Warn("could not try to acquire the lock", zap.Error(err))
		}
		timer := le.clock.NewTimer(wait.Jitter(le.cfg.RetryPeriod, JitterFactor))
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C():
		case <-le.trigger:
			timer.Stop()
		}
	}
}

// lead runs one term: starts the callback, renews until the term ends, stops
// the callback, and releases the lock if ctx was cancelled.
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

	stillHeld := le.renew(ctx)
	le.setLeading(false)
	cancel()
	le.waitStopped(done)
	if stillHeld && le.cfg.ReleaseOnCancel {
		le.release()
	}
	if !stillHeld {
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

// renew keeps the lock until ctx is cancelled (returns true: still held) or
// the term is lost (false): another holder appeared, or no renew succeeded
// for RenewDeadline.
func (le *LeaderElector) renew(ctx context.Context) (stillHeld bool) {
	lastRenew := le.clock.Now()
	timer := le.clock.NewTimer(le.cfg.RetryPeriod)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-timer.C():
		}
		remaining := le.cfg.RenewDeadline - le.clock.Since(lastRenew)
		if remaining <= 0 {
			le.log.Warn("renew deadline passed; stopping leadership", zap.Duration("renewDeadline", le.cfg.RenewDeadline))
			return false
		}
		attemptCtx, cancel := context.WithTimeout(ctx, remaining)
		outcome, err := le.attempt(attemptCtx, true)
		cancel()
		le.setLastError(err)
		switch outcome {
		case acquired:
			lastRenew = le.clock.Now()
		case heldByOther:
			le.log.Info("another holder took the lock; stopping leadership at once", zap.String("holder", le.GetLeader()))
			return false
		case failed:
			if ctx.Err() != nil {
				return true
			}
			le.metrics.RenewFailed(le.cfg.Name)
			le.log.Warn("failed to renew", zap.Error(err))
		}
		timer.Reset(le.cfg.RetryPeriod)
	}
}

type outcome int

const (
	acquired    outcome = iota // the lock is ours now (taken or renewed)
	heldByOther                // someone else holds it and we may not take it
	failed                     // the API call failed; state unknown
)

// attempt makes one try to take or renew the lock.
func (le *LeaderElector) attempt(ctx context.Context, renewing bool) (outcome, error) {
	if !renewing {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, le.cfg.RenewDeadline)
		defer cancel()
	}
	now := le.clock.Now()
	desired := resourcelock.Record{
		HolderIdentity:       le.cfg.Lock.Identity(),
		HolderKey:            le.cfg.Lock.Key(),
		LeaseDurationSeconds: int(le.cfg.LeaseDuration / time.Second),
		AcquireTime:          metav1.NewTime(now),
		RenewTime:            metav1.NewTime(now),
	}

	// Fast path: a leader overwrites the object version it last wrote. If
	// anyone else wrote since, the update conflicts and we read below.
	if renewing {
		if prev, _ := le.Observed(); prev.HolderIdentity == desired.HolderIdentity {
			desired.AcquireTime = prev.AcquireTime
			desired.LeaderTransitions = prev.LeaderTransitions
			err := le.cfg.Lock.Update(ctx, desired)
			if err == nil {
				le.observeOwnWrite(desired, now)
				return acquired, nil
			}
			if ctx.Err() != nil {
				return failed, err
			}
			le.log.Debug("renew without read failed; reading the lock", zap.Error(err))
		}
	}

	rec, raw, err := le.cfg.Lock.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		if err := le.cfg.Lock.Create(ctx, desired); err != nil {
			return failed, fmt.Errorf("create %s: %w", le.cfg.Lock.Describe(), err)
		}
		le.observeOwnWrite(desired, now)
		return acquired, nil
	case errors.Is(err, resourcelock.ErrCorruptRecord):
		return le.overwriteCorrupt(ctx, renewing, desired, raw, err, now)
	case err != nil:
		return failed, fmt.Errorf("get %s: %w", le.cfg.Lock.Describe(), err)
	}
	le.observe(rec, raw, now)

	me := desired.HolderIdentity
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
			stealing = true
		}
		desired.LeaderTransitions = rec.LeaderTransitions + 1
	} else {
		desired.AcquireTime = rec.AcquireTime
		desired.LeaderTransitions = rec.LeaderTransitions
	}

	if err := le.cfg.Lock.Update(ctx, desired); err != nil {
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

// overwriteCorrupt handles a record that cannot be decoded. A follower
// treats it as held by an unknown holder that expires LeaseDuration after the
// bytes were first seen; a leader repairs it at once, since whoever broke it
// cannot be a holder that this elector would recognise.
func (le *LeaderElector) overwriteCorrupt(ctx context.Context, renewing bool, desired resourcelock.Record, raw []byte, cause error, now time.Time) (outcome, error) {
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
	if !renewing && now.Before(firstSeen.Add(le.cfg.LeaseDuration)) {
		return heldByOther, nil
	}
	if renewing && prev.HolderIdentity == desired.HolderIdentity {
		desired.AcquireTime = prev.AcquireTime
		desired.LeaderTransitions = prev.LeaderTransitions
	} else {
		desired.LeaderTransitions = prev.LeaderTransitions + 1
	}
	if err := le.cfg.Lock.Update(ctx, desired); err != nil {
		return failed, fmt.Errorf("replace corrupt record in %s: %w", le.cfg.Lock.Describe(), err)
	}
	le.observeOwnWrite(desired, now)
	return acquired, nil
}

// release writes an empty holder with a one-second lease so that others may
// take the lock at once. It retries after conflicts as long as the record is
// still ours.
func (le *LeaderElector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), le.cfg.RenewDeadline)
	defer cancel()
	for i := 0; i < releaseAttempts; i++ {
		prev, _ := le.Observed()
		if prev.HolderIdentity != le.cfg.Lock.Identity() {
			return
		}
		now := le.clock.Now()
		released := resourcelock.Record{
			LeaseDurationSeconds: 1,
			LeaderTransitions:    prev.LeaderTransitions,
			AcquireTime:          metav1.NewTime(now),
			RenewTime:            metav1.NewTime(now),
		}
		err := le.cfg.Lock.Update(ctx, released)
		if err == nil {
			le.observeOwnWrite(released, now)
			le.log.Info("released the lock")
			return
		}
		if !apierrors.IsConflict(err) {
			le.log.Warn("failed to release the lock", zap.Error(err))
			return
		}
		rec, raw, err := le.cfg.Lock.Get(ctx)
		if err != nil {
			le.log.Warn("failed to read the lock after a release conflict", zap.Error(err))
			return
		}
		le.observe(rec, raw, now)
	}
	le.log.Warn("gave up releasing the lock after repeated conflicts", zap.Int("attempts", releaseAttempts))
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
	secs := min(le.observedRecord.LeaseDurationSeconds, maxRecordLeaseSeconds)
	return !le.observedTime.Add(time.Duration(secs) * time.Second).Before(now)
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
