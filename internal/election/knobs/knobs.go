// Package knobs describes the election settings that exist only for the
// module's tests, benchmark and simulation (package testknobs builds them)
// and the counters of an election.Shared. Package election reads a Set
// through its WithTestKnobs option; programs outside the module cannot
// build one.
package knobs

import (
	"time"

	"github.com/meshd-io/meshd/internal/metrics"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Set is one or more test settings; a nil field leaves its setting alone.
type Set struct {
	// StartAtOnceAfterSteal: see testknobs.StartAtOnceAfterSteal.
	StartAtOnceAfterSteal *bool
	// RunBackoff is the initial and the longest back-off after a failed
	// run function; see testknobs.RunBackoff.
	RunBackoff *[2]time.Duration
	// Timing is the lease duration, renew deadline and retry period; see
	// testknobs.Timing.
	Timing *[3]time.Duration
	// Metrics: see testknobs.Metrics.
	Metrics metrics.Metrics
	// EventRecorder: see testknobs.EventRecorder.
	EventRecorder resourcelock.EventRecorder
	// ReleaseYieldStep: see testknobs.ReleaseYieldStep.
	ReleaseYieldStep *time.Duration
}

// Activity counts what an election.Shared runs at one moment.
type Activity struct {
	// LockWatches is the number of watches of lock objects (one per
	// client, namespace and lock kind).
	LockWatches int
	// DefaultWatches is the number of watches of the default revision (one
	// per client, webhook and label).
	DefaultWatches int
	// Sessions is the number of session heartbeats (WithSessions).
	Sessions int
	// Rosters is the number of rosters of LeaseCandidates (coordinated
	// modes).
	Rosters int
	// PodWatches is the number of watches of Pods (one per holder Pod
	// followed, and one per Pod of WithPodIdentity).
	PodWatches int
}
