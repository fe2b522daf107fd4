package election

import (
	"sync"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/election/identity"
	"github.com/meshd-io/meshd/internal/election/knobs"
	"github.com/meshd-io/meshd/internal/election/podexit"
	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/internal/pacing"
)

// Shared is what elections built with it share, in the manner of etcd's
// concurrency.Session: one watch of the lock objects per client, namespace
// and lock kind, one watch of the default revision per client and webhook,
// one session heartbeat per namespace and ttl (WithSessions), one roster of
// candidates per namespace (coordinated modes), one pacer of first attempts,
// one watch per Pod for Pod-aware failover, and one default identity. Nothing of it is process-wide: elections share
// only what they were given the same Shared for, so a program decides what
// is shared, and a test can build independent worlds in one process.
//
// A Group makes one for all its elections (or uses the one given to NewGroup
// with WithShared). A standalone election (New, the istiod-style
// constructors, NewCoordinator) makes one of its own unless WithShared
// passes one in; give the same Shared to standalone elections that should
// share their watches.
//
// A Shared runs goroutines only while an election that uses it runs: every
// watch, session and roster starts with its first user and stops, its
// goroutines awaited, with its last. It therefore needs no Close. It is safe
// for concurrent use. The zero value is not usable: call NewShared.
type Shared struct {
	hub      *lockwatch.WatchHub
	watchers *defaultwatch.SharedWatchers
	sessions *session.Sessions
	rosters  *coordinated.Rosters
	pacer    *pacing.Pacer
	pods     *podexit.Watches

	identityOnce sync.Once
	identity     string
}

// NewShared returns a Shared that runs nothing yet.
func NewShared() *Shared {
	hub := lockwatch.NewWatchHub()
	return &Shared{
		hub:      hub,
		watchers: defaultwatch.NewSharedWatchers(),
		// Sessions follow their Leases through the locks' hub: a holder
		// credits a heartbeat only once it came back through the watch that
		// also delivers its lock.
		sessions: session.NewSessions(hub),
		rosters:  coordinated.NewRosters(),
		pacer:    pacing.NewPacer(),
		pods:     podexit.NewWatches(),
	}
}

// usable reports whether s was built by NewShared.
func (s *Shared) usable() bool { return s != nil && s.hub != nil }

// Identity is the holder identity of the elections of s whose Spec names
// none, drawn on first use and kept for the life of s: the host name and a
// random suffix, so that two processes on one host (or two pods sharing a
// host name) never share an identity by accident and each believe they
// hold the lock.
func (s *Shared) Identity() string {
	s.identityOnce.Do(func() { s.identity = identity.Draw() })
	return s.identity
}

// running reports what s runs now; all zero once every election that used
// it has returned. Tests read it through package testknobs.
// Activity counts the watches, sessions and rosters s runs now; all zero
// once every election that used it has returned.
func (s *Shared) Activity() knobs.Activity { return s.running() }

func (s *Shared) running() knobs.Activity {
	return knobs.Activity{
		LockWatches:    s.hub.Watches(),
		DefaultWatches: s.watchers.Running(),
		Sessions:       s.sessions.Running(),
		Rosters:        s.rosters.Running(),
		PodWatches:     s.pods.Running(),
	}
}

// WithShared makes the election (or every election of a Group, when given to
// NewGroup) use s for what elections share; see Shared. Without it a
// standalone election uses a Shared of its own and a Group one for all its
// elections. A nil or zero s is refused.
func WithShared(s *Shared) Option {
	return func(o *options) { o.shared, o.sharedSet = s, true; o.mark("WithShared") }
}
