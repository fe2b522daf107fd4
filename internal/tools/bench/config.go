package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/meshd-io/meshd/pkg/election"
)

// Config is what every latency and request scenario shares.
type Config struct {
	// TTL is the lease duration of every implementation.
	TTL time.Duration
	// Trials is how many times each latency is measured per implementation.
	Trials int
	// Logf prints progress.
	Logf func(format string, args ...any)
	// Trace, if set, receives a timeline of every meshd handover trial:
	// each candidate's requests, watch deliveries and elector log, and its
	// run function's start and stop (for diagnosis).
	Trace io.Writer
}

func (c Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// retry is the retry period every implementation derives from the ttl.
func (c Config) retry() time.Duration { return c.TTL / 4 }

// steadyPause is how long to wait after an election has settled before
// acting on it: at least one retry period, so that followers are in their
// steady state, plus a random part, so that the action falls at a random
// phase of the leader's renew cycle (a fixed pause would make a crash
// coincide with a renew every time).
func (c Config) steadyPause() time.Duration {
	return c.retry() + rand.N(c.retry())
}

// settleTimeout bounds the wait for a first leader that everyone sees:
// client-go followers look only every 1-2.2 retry periods.
func (c Config) settleTimeout() time.Duration { return 3*c.TTL + 10*time.Second }

// takeoverTimeout bounds every wait for a new leader: a lease must expire,
// or a handover request be answered or time out.
func (c Config) takeoverTimeout() time.Duration {
	return 3*c.TTL + election.DefaultHandoverGrace + 10*time.Second
}

// stopTimeout bounds how long a candidate may take to return once cancelled.
func (c Config) stopTimeout() time.Duration {
	return 2*c.TTL + election.DefaultStopTimeout + 5*time.Second
}

// Validate rejects settings that would make no sense.
func (c Config) Validate() error {
	if c.TTL < 2*time.Second {
		return fmt.Errorf("ttl %v: must be at least 2s (leases store whole seconds and client-go needs RenewDeadline > 1.2 x RetryPeriod)", c.TTL)
	}
	if c.Trials < 1 {
		return fmt.Errorf("trials %d: must be at least 1", c.Trials)
	}
	return nil
}
