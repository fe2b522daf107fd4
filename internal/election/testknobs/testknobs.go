// Package testknobs builds the election settings that exist for tests,
// benchmarks and the simulation only: they trade a guarantee for speed or
// measurement, or expose counters that programs have no use for. They are
// election.Options like the public ones, and New checks where they apply in
// the same way, naming them "testknobs.<Name>".
package testknobs

import (
	"time"

	"github.com/meshd-io/meshd/internal/election/knobs"
	"github.com/meshd-io/meshd/internal/metrics"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// StartAtOnceAfterSteal makes the run functions start as soon as the lock
// is taken by force from a holder that did not hand it over, as istiod
// does, instead of once the old holder's lease has run out by this
// instance's clock; the two may then work at once. It applies to racing,
// prioritized elections.
func StartAtOnceAfterSteal(atOnce bool) election.Option {
	return election.WithTestKnobs(knobs.Set{StartAtOnceAfterSteal: &atOnce})
}

// RunBackoff sets the wait before contending again after a term ended by a
// failed run function: initial after the first such term, doubling for each
// one in a row, at most max (defaults 1s and 1m). With elections enabled,
// the wait is never shorter than the RetryPeriod.
func RunBackoff(initial, max time.Duration) election.Option {
	return election.WithTestKnobs(knobs.Set{RunBackoff: &[2]time.Duration{initial, max}})
}

// Timing sets the lease duration, renew deadline and retry period apart
// instead of splitting one ttl; they must satisfy leaseDuration ≥ 1s and
// leaseDuration > renewDeadline > 1.2 × retryPeriod > 0. It cannot be
// combined with election.WithTTL.
func Timing(leaseDuration, renewDeadline, retryPeriod time.Duration) election.Option {
	return election.WithTestKnobs(knobs.Set{Timing: &[3]time.Duration{leaseDuration, renewDeadline, retryPeriod}})
}

// Metrics sends what the elections do to m, instead of exporting it with
// election.WithPrometheus (not beside it).
func Metrics(m metrics.Metrics) election.Option {
	return election.WithTestKnobs(knobs.Set{Metrics: m})
}

// EventRecorder records the Kubernetes Events about the lock objects with
// r, instead of through election.WithEvents (not beside it).
func EventRecorder(r resourcelock.EventRecorder) election.Option {
	return election.WithTestKnobs(knobs.Set{EventRecorder: r})
}

// ReleaseYieldStep sets how long a racing candidate waits per class below
// the best before it takes a released or expired lock (15ms by default).
// A test of the order in which candidates take a lock lengthens it so that
// the order does not depend on the host's scheduling.
func ReleaseYieldStep(step time.Duration) election.Option {
	return election.WithTestKnobs(knobs.Set{ReleaseYieldStep: &step})
}

// Activity counts what an election.Shared runs at one moment.
type Activity = knobs.Activity

// SharedActivity reports what s runs now; all zero once every election that
// used it has returned.
func SharedActivity(s *election.Shared) Activity { return s.Activity() }
