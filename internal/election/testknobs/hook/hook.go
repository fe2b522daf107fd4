// Package hook carries, from package election to package testknobs, the
// constructors of the election settings that only tests, benchmarks and the
// simulation use. Package election sets the variables when it is
// initialised; nothing else sets them. Each constructor returns an
// election.Option, which this package cannot name without an import cycle.
package hook

import (
	"time"

	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

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

// The constructors package election provides.
var (
	StartAtOnceAfterSteal func(atOnce bool) any
	RunBackoff            func(initial, max time.Duration) any
	Timing                func(leaseDuration, renewDeadline, retryPeriod time.Duration) any
	Metrics               func(m elector.Metrics) any
	EventRecorder         func(r resourcelock.EventRecorder) any
	// SharedActivity takes an *election.Shared.
	SharedActivity func(shared any) Activity
)
