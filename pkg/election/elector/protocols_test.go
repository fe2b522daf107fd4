package elector

import (
	"time"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/protocol"
	"github.com/meshd-io/meshd/internal/protocol/handover"
	"github.com/meshd-io/meshd/internal/protocol/sessions"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// cooperative returns cfg with cooperative preemption of the given grace
// and acceptance rule, wired as package election wires it; a grace of zero
// or less leaves cfg without it.
func cooperative(cfg Config, grace time.Duration, accept func(candidateKey string) bool) Config {
	if grace <= 0 {
		return cfg
	}
	cfg.Handover = handover.New(handover.Config{
		Name: cfg.Name, Lock: cfg.Lock.(lockcap.HandoverLock), Grace: grace, Accept: accept,
		Outranks: cfg.KeyComparison, YieldDelay: cfg.YieldOnRelease,
		LeaseDuration: cfg.LeaseDuration, RetryPeriod: cfg.RetryPeriod,
		Logger: cfg.Logger, Metrics: cfg.Metrics,
	})
	return cfg
}

// inSession returns session mode on lock for the heartbeat s, wired as
// package election wires it.
func inSession(lock resourcelock.Interface, retry time.Duration, s sessions.Heartbeat) protocol.Sessions {
	return sessions.New(sessions.Config{Name: lockName, Heartbeat: s, Lock: lock.(sessions.Lock), RetryPeriod: retry})
}
