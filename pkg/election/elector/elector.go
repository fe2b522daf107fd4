package elector

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/internal/election/emptied"
	"github.com/meshd-io/meshd/internal/election/ordered"
	"github.com/meshd-io/meshd/internal/election/wake"
	"github.com/meshd-io/meshd/internal/electionlog"
	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/internal/metrics"
	"github.com/meshd-io/meshd/internal/ownstack"
	"github.com/meshd-io/meshd/internal/pacing"
	"github.com/meshd-io/meshd/internal/protocol/coordination"
	"github.com/meshd-io/meshd/internal/protocol/damping"
	"github.com/meshd-io/meshd/internal/protocol/handover"
	"github.com/meshd-io/meshd/internal/protocol/preemption"
	"github.com/meshd-io/meshd/internal/protocol/sessions"
	"github.com/meshd-io/meshd/internal/protocol/yield"
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

// Event reasons the elector records on the lock object. ReasonCorruptRecord
// is exported for programs that watch for it; the others are stated in
// the docs where they arise (RunFunctionFailed is package election's).
const (
	reasonLeaderElection      = "LeaderElection"
	ReasonCorruptRecord       = "CorruptLeaderRecord"
	reasonLeaseTooLong        = "LeaseDurationTooLong"
	reasonPreemptionSuspended = preemption.ReasonSuspended
	reasonRunStuck            = "RunFunctionStuck"
)

// clockTimer is the timer of the injected clock.
type clockTimer = clock.Timer

// timerC is t's channel; nil (never ready) for a nil timer.
func timerC(t clockTimer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}

// LeaderElector runs one candidate of one election. Create it with New.
type LeaderElector struct {
	cfg     Config
	log     *zap.Logger
	clock   clock.WithTicker
	trigger chan struct{}

	// watch is set when Config.Watch is; see watch.go.
	watch *lockWatch
	// proto is the protocols plugged into the core.
	proto plugins
	// damper limits steals; see package internal/protocol/damping.
	damper *damping.Damper

	// loop and fence are used only by Run: by the goroutine running it,
	// and by the work it hands to a goroutine of its own and waits for
	// (package ownstack), one step at a time.
	loop  loopState
	fence fenceState

	mu    sync.Mutex
	obs   observation // guarded by mu
	state status      // guarded by mu
}

// plugins are the protocols plugged into the core (see package
// internal/protocol), each a null object when Config does not turn it on,
// so that the core calls them without asking which are on.
type plugins struct {
	handover handover.Role     // Config.Handover
	coord    coordination.Role // Config.Coordination
	session  sessions.Role     // Config.Session
	yield    *yield.Release    // Config.YieldOnRelease
	priority *preemption.Rule  // Config.KeyComparison, with the damper
	pacer    *pacing.First     // Config.Pacer
}

// loopState is what the election loop keeps between attempts and terms.
type loopState struct {
	lastRenew      time.Time          // when the last successful renew of this term was sent; the attempt that won it counts as one
	ledTerm        string             // termKey of the record of the last term this candidate led
	wrote          lockcap.RenewMark  // the renew time this candidate's last write of its record stored, and when
	emptied        emptied.Since      // when the lock object was first seen missing or without a record
	stopping       bool               // the callback is stopping: renew, answer nothing
	handTo         *lockmeta.Handover // the request accepted by the last renew
	namedFrom      time.Time          // set by an attempt that leads on a record naming this candidate without a write
	reportedLeader string             // the holder last reported to OnNewLeader
	warnedLease    string             // holder and lease of the last over-long lease reported
	watchEpoch     uint64             // the watch's Epoch before this candidate's last successful write of its record (session mode)
	writeEpoch     uint64             // the watch's Epoch before the write under way (session mode)
	wroteVersion   string             // the resourceVersion of that write, once made: a watch that hands it over again covers it
	conflicted     bool               // the last attempt's write conflicted, and the watch has delivered no version since
}

// fenceState is the fence as a value: when the run callback of the coming
// term may start at the earliest.
type fenceState struct {
	startAt   time.Time // the fence: the callback starts no earlier
	inherited time.Time // fence of a record naming this identity that this process found at first sight
}

// observation is the record last observed and what goes with it.
type observation struct {
	record     resourcelock.Record
	raw        []byte
	time       time.Time // when this process saw the record change
	corrupt    bool
	term       string    // termKey of the record last observed
	termSeenAt time.Time // when that term was seen to begin; zero: found on
	session    string    // the session the observed record's mark names for its holder
}

// status is what the elector reports to other goroutines.
type status struct {
	leading      bool
	stuck        bool
	lastErr      error
	sessionRenew time.Time // when the session heartbeat last credited to this term was sent
}

// New validates cfg and returns an elector. It does not talk to the API
// server until Run.
func New(cfg Config) (*LeaderElector, error) {
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = (cfg.LeaseDuration - cfg.RetryPeriod) / 2
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	le := &LeaderElector{
		cfg:     cfg,
		log:     electionlog.For(cfg.Logger, cfg.Name, cfg.Lock),
		clock:   cfg.Clock,
		trigger: make(chan struct{}, 1),
		damper:  damping.New(cfg.RetryPeriod, cfg.LeaseDuration),
	}
	if le.clock == nil {
		le.clock = clock.RealClock{}
	}
	if le.cfg.Metrics == nil {
		le.cfg.Metrics = metrics.Nop{}
	}
	le.proto = plugins{
		handover: handover.NewRole(cfg.Handover, cfg.Lock, cfg.timing(), le.log),
		coord:    coordination.NewRole(cfg.Coordination, cfg.Lock, le.log),
		session:  sessions.NewRole(cfg.Session, cfg.Lock.Identity()),
		yield:    yield.New(cfg.YieldOnRelease),
		pacer:    pacing.NewFirst(cfg.Pacer),
	}
	le.proto.priority = preemption.New(preemption.Config{Name: cfg.Name, Lock: cfg.Lock,
		Damper: le.damper, Handover: &le.proto.handover, Metrics: le.cfg.Metrics, Logger: le.log})
	if cfg.Watch && le.cfg.Hub == nil {
		le.cfg.Hub = lockwatch.NewWatchHub()
	}
	// A sink that can create an election's series at 0 does so now, so that
	// rates and alerts see a zero rather than no data.
	if m, ok := le.cfg.Metrics.(interface{ Init(name string) }); ok {
		m.Init(cfg.Name)
	}
	if cfg.Watch {
		le.watch = newLockWatch(le, cfg.Lock.(lockcap.Watchable))
	}
	return le, nil
}

// Run takes part in the election until ctx is cancelled or one term of
// leadership has ended, whichever comes first.
//
// A term ends when ctx is cancelled, the lock is lost, a candidate is
// granted it, or the OnStartedLeading callback returns or panics. Run then
// cancels the callback's context and waits for it to return while it keeps
// renewing the lock, so that no successor starts beside it; only then does
// it hand the lock over or release it. Run returns only after the callback
// has returned: a callback that ignores its context keeps Run (and the
// lock) waiting, which is logged and makes Check fail so that a health
// check restarts the process.
//
// Run may be called again after it returns, to contend for another term; it
// must not be called concurrently with itself. It contends at once: a
// caller whose callback failed decides whether and how long to wait first
// (package election backs off, and keeps the failures to at most one
// transition per RetryPeriod).
func (le *LeaderElector) Run(ctx context.Context) {
	if le.watch != nil {
		defer le.watch.start()()
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
	return le.state.leading
}

// GetLeader returns the holder identity last observed in the record ("" when
// unknown or released).
func (le *LeaderElector) GetLeader() string {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.obs.record.HolderIdentity
}

// Observed returns the record last observed and when it was observed.
func (le *LeaderElector) Observed() (resourcelock.Record, time.Time) {
	o := le.seen()
	return o.record, o.time
}

// seen returns a copy of what this candidate last observed.
func (le *LeaderElector) seen() observation {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.obs
}

// LastError returns the error of the latest attempt to acquire or renew, or
// of the run callback that ended the last term; nil when the latest attempt
// succeeded or found the lock held by another candidate. It tells why a
// candidate cannot lead (for example missing RBAC permissions) or why its
// term ended.
func (le *LeaderElector) LastError() error {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.state.lastErr
}

// Preemption reports whether this candidate currently preempts holders it
// outranks, or has suspended preemption after a steal cycle.
func (le *LeaderElector) Preemption() Preemption { return le.proto.priority.State() }

// Trigger makes a waiting candidate try to acquire at once instead of at its
// next retry, for example because the key comparison may have changed; a
// candidate whose handover request was refused asks again, and a leader
// reconsiders a request it refused. It never blocks.
func (le *LeaderElector) Trigger() {
	select {
	case le.trigger <- struct{}{}:
	default:
	}
}

// Check returns an error when this candidate leads but has not renewed for
// longer than LeaseDuration + tolerance, which means others may already
// lead, or when its run callback has outlived StopTimeout after its term
// ended. Other followers are healthy.
func (le *LeaderElector) Check(tolerance time.Duration) error {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.state.stuck {
		return fmt.Errorf("%s: the run callback has not stopped within %v of the end of its term",
			le.cfg.Lock.Describe(), le.cfg.StopTimeout)
	}
	if !le.state.leading {
		return nil
	}
	renewed := le.obs.time
	if le.state.sessionRenew.After(renewed) {
		renewed = le.state.sessionRenew
	}
	if since := le.clock.Since(renewed); since > le.cfg.LeaseDuration+tolerance {
		return fmt.Errorf("%s: leader has not renewed for %v (lease %v, tolerance %v)",
			le.cfg.Lock.Describe(), since.Round(time.Millisecond), le.cfg.LeaseDuration, tolerance)
	}
	return nil
}

// acquire tries until the lock is taken (true) or ctx ends (false). The
// goroutine running Run only waits here: what follows a wake-up, down to
// the API requests, runs on a goroutine of its own (package ownstack), so
// that the waiting goroutine keeps a small stack (see the package doc, The
// stack of a waiting candidate).
func (le *LeaderElector) acquire(ctx context.Context) bool {
	le.log.Debug("contending for leadership")
	wait := le.tryFirst(ctx)
	for wait != tookLock {
		timer := le.clock.NewTimer(wait)
		// Taken in a fixed order when several happened at once (package
		// ordered): a delivery is seen before a trigger or the timer acts.
		which := ordered.First4(ctx.Done(), le.watchEvents(), le.trigger, timer.C())
		timer.Stop()
		if which == 0 {
			return false
		}
		wait = ownstack.Call(func() time.Duration { return le.followerWoke(ctx, which) })
	}
	return true
}

// tookLock is the wait after an attempt that took the lock.
const tookLock time.Duration = -1

// followerWoke acts on what woke a follower, which (as First4 in acquire
// numbers it): a watch delivery, a trigger or the timer. It returns the
// wait that follows (see waitAfter).
func (le *LeaderElector) followerWoke(ctx context.Context, which int) time.Duration {
	tryNow := true
	switch which {
	case 1:
		tryNow = le.watch.ingest() && le.worthTrying() && !le.yieldOnRelease(le.clock.Now())
	case 2:
		le.proto.handover.Triggered()
	}
	return le.waitAfter(tryNow && le.tryAcquire(ctx))
}

// waitAfter is the wait of a follower after an attempt that took the lock
// (tookLock) or did not (followerWait).
func (le *LeaderElector) waitAfter(took bool) time.Duration {
	if took {
		return tookLock
	}
	return le.followerWait()
}

// tryAcquire makes one attempt to take the lock.
func (le *LeaderElector) tryAcquire(ctx context.Context) bool {
	started := le.clock.Now()
	out, err := le.attempt(ctx, false)
	le.setLastError(err)
	switch out {
	case acquired:
		le.loop.lastRenew = started
		if !le.loop.namedFrom.IsZero() {
			// Led on a record written by the previous holder: the term
			// counts from the request it answered (see namedSince).
			le.loop.lastRenew, le.loop.namedFrom = le.loop.namedFrom, time.Time{}
		}
		rec, _ := le.Observed() // the record of the term just won, naming this candidate
		le.loop.ledTerm = handover.TermKey(&rec)
		le.proto.coord.Acquired()
		le.log.Info("acquired leadership")
		return true
	case failed:
		le.log.Warn("could not try to acquire the lock", zap.Error(err))
	}
	return false
}

// jitter returns d stretched by a random fraction of up to JitterFactor, as
// wait.Jitter does, drawn from Config.Rand when one is set.
func (le *LeaderElector) jitter(d time.Duration) time.Duration {
	if le.cfg.Rand == nil {
		return wait.Jitter(d, JitterFactor)
	}
	return d + time.Duration(le.cfg.Rand.Float64()*JitterFactor*float64(d))
}

// followerWait is how long a follower sleeps before its next attempt when
// nothing happens meanwhile. Polling, it is the jittered retry period; with
// a working watch, it is the time until the lease runs out by this
// candidate's observation, or until the handover protocol or the steal
// damper may let it act, whichever comes first (see package
// internal/election/wake), and at most the retry period after an attempt
// whose write conflicted, until the watch delivers a version that explains
// the conflict (see lockWatch.ingest).
func (le *LeaderElector) followerWait() time.Duration {
	poll := le.jitter(le.cfg.RetryPeriod)
	if le.watch == nil || !le.watch.Healthy() {
		return poll
	}
	o := le.seen()
	if o.time.IsZero() || (o.record.HolderIdentity == "" && !o.corrupt) || o.record.HolderIdentity == le.cfg.Lock.Identity() {
		// Nothing known, free, or handed to this candidate: the last
		// attempt failed, retry at the polling pace; an object without a
		// record that may have an unknown holder is tried when it may not;
		// a yielding or coordinated candidate tries when it may.
		now := le.clock.Now()
		return wake.Free(now, poll, le.loop.emptied.WakeAt(now, le.cfg.LeaseDuration), le.proto.yield.WakeAt(now), le.proto.coord.WakeAt())
	}
	lease := le.cfg.LeaseDuration
	if !o.corrupt {
		lease = honouredLease(o.record)
	}
	if w := le.heldWait(poll, o.time.Add(lease)); !le.loop.conflicted || w < poll {
		return w
	}
	return poll
}

// heldWait is followerWait for a lock held by another holder whose record
// runs out at end by this candidate's observation; poll is the jittered
// retry period.
func (le *LeaderElector) heldWait(poll time.Duration, end time.Time) time.Duration {
	now := le.clock.Now()
	end = le.aliveUntil(now, end) // the holder's session may keep it alive longer
	return wake.Held{End: end, Yield: le.proto.yield.Delay(), Act: []time.Time{le.damper.WakeAt(now), le.proto.handover.WakeAt(now)},
		Vacancy: le.proto.coord.WakeAt(), Empty: le.loop.emptied.WakeAt(now, le.cfg.LeaseDuration)}.Wait(now, poll)
}

// worthTrying reports whether the record last observed may let this
// candidate acquire now: it is free, names this candidate, has expired, or is
// held by a holder the key comparison lets it take from. A corrupt record is
// left to the expiry timer.
func (le *LeaderElector) worthTrying() bool {
	o := le.seen()
	rec := o.record
	switch {
	case o.corrupt:
		return false // the expiry timer decides
	case rec.HolderIdentity == le.cfg.Lock.Identity():
		return true
	case rec.HolderIdentity == "" || !le.leaseValid(le.clock.Now()):
		return !le.proto.coord.LeaveVacant(le.clock.Now())
	case le.proto.coord.Coordinated():
		return false
	default:
		return le.cfg.KeyComparison != nil && le.cfg.KeyComparison(rec.HolderKey)
	}
}

// withdraw is how a candidate that stops without leading leaves: if it
// asked for a handover, it takes the request back, and if the holder has
// already handed it the lock, it releases the lock, so that nobody waits out
// a lease that no one renews; unless the record carries a fence to it that
// has not passed (the previous holder took the lock by force, and the work
// of the holder before may still run): then it leaves the lock to expire,
// as holdUntilFence does, so that nobody starts beside that work.
func (le *LeaderElector) withdraw() {
	asked := !le.proto.handover.AskedAt().IsZero()
	if !asked && le.GetLeader() != le.cfg.Lock.Identity() {
		return // never asked, never named: nothing to undo
	}
	if asked && !le.retract() {
		return
	}
	if now := le.clock.Now(); le.proto.handover.CarriedFence(le.fence.startAt, now, true).After(now) {
		le.leaveSession()
		return
	}
	le.release()
}

func (le *LeaderElector) setLastError(err error) {
	le.mu.Lock()
	le.state.lastErr = err
	le.mu.Unlock()
}

func (le *LeaderElector) setStuck(v bool) {
	le.mu.Lock()
	le.state.stuck = v
	le.mu.Unlock()
}

func (le *LeaderElector) setLeading(v bool) {
	le.mu.Lock()
	le.state.leading = v
	le.mu.Unlock()
	le.cfg.Metrics.SetLeading(le.cfg.Name, v)
}
