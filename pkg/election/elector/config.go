package elector

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/internal/metrics"
	"github.com/meshd-io/meshd/internal/pacing"
	"github.com/meshd-io/meshd/internal/protocol"
	"github.com/meshd-io/meshd/internal/protocol/coordination"
	"github.com/meshd-io/meshd/internal/protocol/handover"
	"github.com/meshd-io/meshd/internal/protocol/sessions"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// JitterFactor stretches each retry wait to a random duration in
// [RetryPeriod, RetryPeriod*(1+JitterFactor)), as client-go does.
const JitterFactor = 1.2

// Callbacks are invoked on leadership changes.
type Callbacks struct {
	// OnStartedLeading runs in its own goroutine when leadership is gained
	// (after a forced steal, once the previous holder's work must have
	// stopped; see Config.StartAtOnceAfterSteal). Its context is cancelled
	// when leadership ends; it should return soon after. If it returns
	// while the term is still on, the term ends and the lock is handed over
	// or released; what it returned is the caller's to report and act on
	// (package election logs a failure, counts it with Metrics.RunFailed
	// and backs off before it contends again). A panic is not recovered.
	// Required.
	OnStartedLeading func(ctx context.Context) error
	// OnStoppedLeading is called after a term has ended and OnStartedLeading
	// has returned. Optional.
	OnStoppedLeading func()
	// OnNewLeader is called, synchronously from the election loop, when the
	// observed holder identity changes (including to this candidate). It
	// must not block. Optional.
	OnNewLeader func(identity string)
}

// Config configures a LeaderElector. Build one with the fields below and pass
// it to New, which validates it.
type Config struct {
	// Name labels metrics and logs; typically the election ID.
	Name string
	// Lock stores the record. Its Identity and Key are what this candidate
	// writes.
	Lock resourcelock.Interface

	// LeaseDuration is how long followers wait, after they last saw the record
	// change, before taking the lock. It is written to the record in whole
	// seconds, rounded up, so it must be at least one second.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// gives up leadership, counted from when it sent its last successful
	// renew. Must be shorter than LeaseDuration.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between attempts. RenewDeadline must exceed
	// JitterFactor*RetryPeriod.
	RetryPeriod time.Duration

	Callbacks Callbacks

	// KeyComparison, if set, allows taking an unexpired lock from a holder
	// with a lesser key. It is consulted only when the lock is held by
	// another identity and has not expired: it receives the holder's key
	// and returns true when this candidate should take the lock anyway.
	// Comparisons of all candidates must not allow cycles (A takes from B
	// and B from A), or the lock would be stolen back and forth forever.
	KeyComparison func(holderKey string) bool

	// ReleaseOnCancel writes an empty holder when the Run context is
	// cancelled while leading, so that others can take over at once.
	ReleaseOnCancel bool
	// StopTimeout is how long OnStartedLeading may take to return once its
	// context is cancelled. The elector keeps renewing the lock while it
	// waits, and releases or hands over the lock only after the callback
	// returned. A callback that takes longer keeps the lock held (no
	// successor starts beside it), is logged, and makes Check fail. It is
	// also the stop time a holder promises when it accepts a handover.
	// Zero means (LeaseDuration - RetryPeriod) / 2. Must be shorter than LeaseDuration -
	// RetryPeriod, so that the promise fits within the holder's lease.
	StopTimeout time.Duration

	// StartAtOnceAfterSteal starts OnStartedLeading as soon as the lock is
	// taken by force from a holder that did not hand it over (istiod,
	// client-go, a hung process). By default the elector takes the lock at
	// once, so that the holder learns at its next renew, but starts the
	// callback only when the old holder's work must have stopped: its last
	// renew as observed here plus the lease it announced. This is zero
	// overlap on the same clock argument as lease expiry; setting this
	// field trades it for speed, as istiod does. A candidate that no longer
	// outranks the holder by KeyComparison once its write has returned
	// waits for that time all the same.
	StartAtOnceAfterSteal bool

	// Watch follows the lock object with a watch instead of polling it. A
	// follower then makes no requests while the holder is alive: it tries to
	// acquire as soon as the lock is released, exactly when the lease
	// expires by its own observation (also after the lock object was
	// deleted), and when Trigger is called. A
	// leader ends its term as soon as an event shows another holder. While
	// the watch is broken the elector polls every RetryPeriod. The watch is
	// Hub's shared one of the lock's client, namespace and kind, which needs
	// list and watch on that kind in the namespace. The lock must implement
	// lockcap.Watchable.
	Watch bool
	// Hub is the watch hub through which a watching elector follows its
	// lock, shared with the other electors (and sessions) given the same
	// hub. Nil means a hub of this elector's own, which opens one watch
	// for it alone.
	Hub *lockwatch.WatchHub
	// Pacer paces this elector's first attempt together with those of the
	// other electors given the same pacer. Nil: the first attempt is not
	// paced, as a pacer of its own would never make it wait.
	Pacer protocol.Pacer

	// Handover, if set, turns on cooperative preemption (docs/handover.md;
	// package internal/protocol/handover implements it). A candidate
	// entitled by KeyComparison to take the lock from a holder that
	// advertises cooperation (see lockmeta.HandoverAnnotationKey) first
	// asks it to hand over. The holder answers at once through its watch,
	// or at its next renew: it accepts, with the time within which its work
	// will have stopped, or refuses. The candidate waits Handover.Grace()
	// for an answer before it takes the lock by force (with the fenced
	// start); the grace must exceed RetryPeriod. An accepted request is
	// never followed by force: the holder names the candidate once its work
	// stopped. The lock must implement lockcap.HandoverLock.
	Handover protocol.Handover

	// Coordination, when set, makes this a candidate of a coordinated
	// election (docs/coordinated.md; package internal/protocol/coordination
	// implements it): it never races for the lock and never
	// takes it from a holder; it leads when a coordinator (or the previous
	// holder) writes its identity into the record. A holder whose lock
	// names another candidate as preferred holder stops its work, renewing
	// meanwhile, and then hands the lock to that candidate. The lock must
	// implement lockcap.CoordinatedLock; KeyComparison and
	// Handover must be unset.
	Coordination protocol.Coordination

	// Session, when set, lets the program's session renew this candidate's
	// record while it leads (see "Sessions" in the package doc; package
	// internal/protocol/sessions implements it): the holder
	// names its session in a mark next to the record and stops rewriting
	// the record every RetryPeriod; followers that use sessions too judge
	// it alive while its session is. Use it only when every candidate of
	// the election uses sessions: a candidate that sees a holder without
	// them renews its record itself from then on. The lock must be
	// a *resourcelock.LeaseLock; Watch must be set and Coordination unset,
	// and the session must follow Leases through Hub.
	Session protocol.Sessions

	// HolderExit, if set, may end the lease of the observed holder before
	// it runs out, on proof that the holder's process has exited (see
	// protocol.HolderExit). Nil waits for every lease.
	HolderExit protocol.HolderExit

	// YieldOnRelease, if set, is asked how long this candidate lets others
	// go first when it sees the lock released or expired: a candidate that
	// the election's rule ranks lower waits a little, so that the best
	// candidate that watches the lock takes it and no lesser one holds it
	// for a moment. A yielding candidate takes the lock after its wait if
	// nobody has.
	YieldOnRelease func() time.Duration

	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Rand is the source of the followers' retry jitter; nil draws from
	// math/rand's global source. Only the election loop draws from it, so
	// it need not be safe for concurrent use, but it must not be shared
	// with another elector.
	Rand *rand.Rand
	// Metrics defaults to a no-op implementation.
	Metrics metrics.Metrics
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// TimingFromTTL derives the contract's timings from one ttl:
// LeaseDuration = ttl, RenewDeadline = ttl/2, RetryPeriod = ttl/4.
func TimingFromTTL(ttl time.Duration) (leaseDuration, renewDeadline, retryPeriod time.Duration) {
	return ttl, ttl / 2, ttl / 4
}

// timing is the part of c that the holder's deadlines follow.
func (c *Config) timing() lockcap.Timing {
	return lockcap.Timing{LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline,
		RetryPeriod: c.RetryPeriod, StopTimeout: c.StopTimeout}
}

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	c.validateTiming(add)
	c.validateProtocols(add)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errlist.Join(errs...))
}

// validateTiming reports the problems of the lock and the timings.
func (c *Config) validateTiming(add func(format string, args ...any)) {
	if c.Lock == nil {
		add("Lock must be set")
	} else if c.Lock.Identity() == "" {
		add("Lock identity must not be empty")
	}
	if c.LeaseDuration < time.Second {
		add("LeaseDuration %v must be at least 1s (the record stores whole seconds)", c.LeaseDuration)
	}
	if c.RenewDeadline <= 0 {
		add("RenewDeadline %v must be positive", c.RenewDeadline)
	}
	if c.RetryPeriod <= 0 {
		add("RetryPeriod %v must be positive", c.RetryPeriod)
	}
	if c.LeaseDuration <= c.RenewDeadline {
		add("LeaseDuration %v must be greater than RenewDeadline %v", c.LeaseDuration, c.RenewDeadline)
	}
	if float64(c.RenewDeadline) <= JitterFactor*float64(c.RetryPeriod) {
		add("RenewDeadline %v must be greater than %.1f x RetryPeriod %v", c.RenewDeadline, JitterFactor, c.RetryPeriod)
	}
}

// validateProtocols reports the problems of the watch, the protocols, the
// stop timeout, the callback and the pacer: what each needs of the lock and
// of the other settings.
func (c *Config) validateProtocols(add func(format string, args ...any)) {
	if _, ok := c.Lock.(lockcap.Watchable); c.Watch && c.Lock != nil && !ok {
		add("Watch needs a lock that can be watched; %T cannot", c.Lock)
	}
	each := func(msgs []string) {
		for _, msg := range msgs {
			add("%s", msg)
		}
	}
	each(handover.Problems(c.Handover, c.Lock, c.RetryPeriod))
	if c.StopTimeout < 0 {
		add("StopTimeout %v must not be negative", c.StopTimeout)
	} else if c.StopTimeout >= c.LeaseDuration-c.RetryPeriod && c.LeaseDuration > 0 {
		add("StopTimeout %v must be shorter than LeaseDuration - RetryPeriod (%v), so that a holder's promised stop fits in its lease",
			c.StopTimeout, c.LeaseDuration-c.RetryPeriod)
	}
	if c.Callbacks.OnStartedLeading == nil {
		add("Callbacks.OnStartedLeading must be set")
	}
	each(pacing.Problems(c.Pacer))
	each(sessions.Problems(c.Session, c.Lock, c.Watch, c.Coordination != nil))
	each(coordination.Problems(c.Coordination, c.Lock, c.KeyComparison != nil || c.Handover != nil))
}

// ErrInvalidConfig is wrapped by every validation error.
var ErrInvalidConfig = errors.New("invalid leader election config")
