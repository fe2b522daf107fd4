package elector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// JitterFactor stretches each retry wait to a random duration in
// [RetryPeriod, RetryPeriod*(1+JitterFactor)), as client-go does.
const JitterFactor = 1.2

// KeyComparison is consulted only when the lock is held by another identity
// and has not expired. It receives the holder's key and returns true when this
// candidate should take the lock anyway.
//
// Comparisons of all candidates must not allow cycles (A takes from B and B
// from A), or the lock would be stolen back and forth forever.
type KeyComparison func(holderKey string) bool

// Callbacks are invoked on leadership changes.
type Callbacks struct {
	// OnStartedLeading runs in its own goroutine when leadership is gained.
	// Its context is cancelled when leadership ends; it should return soon
	// after. Its result is the outcome of the term's work. Required.
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
	// with a lesser key.
	KeyComparison KeyComparison

	// ReleaseOnCancel writes an empty holder when the Run context is
	// cancelled while leading, so that others can take over at once.
	ReleaseOnCancel bool
	// StopTimeout bounds how long the elector waits for OnStartedLeading to
	// return before releasing the lock. Zero means do not wait.
	StopTimeout time.Duration

	// Watch follows the lock object with a watch instead of polling it. A
	// follower then makes no requests while the holder is alive: it tries to
	// acquire as soon as the lock is released, exactly when the lease
	// expires by its own observation (also after the lock object was
	// deleted), and when Trigger is called. A
	// leader ends its term as soon as an event shows another holder. While
	// the watch is broken the elector polls every RetryPeriod. The lock must
	// implement resourcelock.Watchable.
	Watch bool

	// HandoverGrace, when positive, turns on cooperative preemption. A
	// candidate entitled by KeyComparison to take the lock from a holder that
	// advertises cooperation (see resourcelock.HandoverAnnotationKey) first
	// asks it to hand over, and takes the lock by force only if the holder has
	// not done so within HandoverGrace. A holder asked to hand over stops its
	// work, waits for it (up to StopTimeout), then writes the record naming
	// the candidate, so the two never run at once. HandoverGrace should
	// exceed StopTimeout. The lock must implement resourcelock.HandoverLock.
	HandoverGrace time.Duration
	// AcceptHandover tells a holder whether to honour a request from a
	// candidate with the given key; requests it refuses are cleared by the
	// next renew. Nil refuses every request.
	AcceptHandover func(candidateKey string) bool

	// Clock defaults to the real clock.
	Clock clock.WithTicker
	// Metrics defaults to a no-op implementation.
	Metrics Metrics
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
}

// TimingFromTTL derives the contract's timings from one ttl:
// LeaseDuration = ttl, RenewDeadline = ttl/2, RetryPeriod = ttl/4.
func TimingFromTTL(ttl time.Duration) (leaseDuration, renewDeadline, retryPeriod time.Duration) {
	return ttl, ttl / 2, ttl / 4
}

// Validate reports every problem of c at once.
func (c *Config) Validate() error {
	var errs *multierror.Error
	add := func(format string, args ...any) { errs = multierror.Append(errs, fmt.Errorf(format, args...)) }
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
	if c.Watch && c.Lock != nil {
		if _, ok := c.Lock.(resourcelock.Watchable); !ok {
			add("Watch needs a lock that can be watched; %T cannot", c.Lock)
		}
	}
	if c.HandoverGrace < 0 {
		add("HandoverGrace %v must not be negative", c.HandoverGrace)
	} else if c.HandoverGrace > 0 && c.Lock != nil {
		if _, ok := c.Lock.(resourcelock.HandoverLock); !ok {
			add("HandoverGrace needs a lock that supports handover; %T does not", c.Lock)
		}
	}
	if c.StopTimeout < 0 {
		add("StopTimeout %v must not be negative", c.StopTimeout)
	}
	if c.Callbacks.OnStartedLeading == nil {
		add("Callbacks.OnStartedLeading must be set")
	}
	if errs == nil {
		return nil
	}
	errs.ErrorFormat = listErrors
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errs)
}

// ErrInvalidConfig is wrapped by every validation error.
var ErrInvalidConfig = errors.New("invalid leader election config")

func listErrors(errs []error) string {
	msg := ""
	for i, err := range errs {
		if i > 0 {
			msg += "; "
		}
		msg += err.Error()
	}
	return msg
}
