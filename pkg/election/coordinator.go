package election

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// CoordinatorElectionID is the election whose leader coordinates the
// Coordinated elections of a namespace.
const CoordinatorElectionID = "meshd-coordinator"

// NewCoordinator returns the election of the coordinator of namespace's
// Coordinated elections: a plain racing election on the Lease
// CoordinatorElectionID whose leader runs the coordinator, which follows
// the default revision (read as the options say, like any prioritized
// election). Every process that runs Coordinated elections in
// the namespace should run one, so that one coordinates while any runs;
// when the leader dies, another takes over within a lease, and the
// coordinated elections keep their holders meanwhile.
//
// decisions, if not nil, is called for every write the coordinator makes
// to a Lease, with the Lease's name and the kind of write: "assign" (a
// vacant Lease got a holder), "prefer" (spec.preferredHolder named a better
// candidate), "clear" (a preference no longer justified was removed) or
// "strategy" (spec.strategy was set on a held Lease). Run the returned
// election like any other (RunContext, or through a Group).
func NewCoordinator(client kubernetes.Interface, namespace, identity string, decisions func(lease, decision string), opts ...Option) (*LeaderElection, error) {
	o := defaultOptions()
	o.apply(opts)
	if !o.sharedSet {
		// The election and its coordinator share one Shared, of their own.
		shared := NewShared()
		o.shared = shared
		opts = append(opts, func(o *options) { o.shared, o.sharedSet = shared, true })
	}
	l, err := New(client, coordinatorSpec(namespace, identity), append(opts, asCoordinator)...)
	if err != nil {
		return nil, err
	}
	watcher := o.watcher // run by the caller
	if watcher == nil {
		if watcher, err = o.shared.watchers.Watcher(client, o.watcherOptions(namespace)); err != nil {
			return nil, fmt.Errorf("election %q: %w", CoordinatorElectionID, err)
		}
		l.ownedWatcher = true // started with the election
	}
	l.coordinatorWatcher = watcher
	return coordinate(l, client, watcher, &o, decisions)
}

// asCoordinator marks the coordinator's own election: a racing election
// that never steals, whose leader follows the default revision for the
// coordinated elections it decides.
func asCoordinator(o *options) { o.coordinator, o.prioritized = true, false }

// NewCoordinator adds the coordinator election of namespace to the group
// (see the package-level NewCoordinator), with the group's options and
// then opts; it follows the group's default-revision watcher.
func (g *Group) NewCoordinator(namespace, identity string, decisions func(lease, decision string), opts ...Option) (*LeaderElection, error) {
	l, err := g.New(coordinatorSpec(namespace, identity), append(opts, asCoordinator)...)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	o := g.base
	o.apply(opts)
	watcher := o.watcher // run by the caller
	if watcher == nil {
		watcher, _, err = g.watcher(o.watcherOptions(namespace))
	}
	g.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("election %q: %w", CoordinatorElectionID, err)
	}
	l.coordinatorWatcher = watcher // run by the group or the caller
	return coordinate(l, g.client, watcher, &o, decisions)
}

func coordinatorSpec(namespace, identity string) Spec {
	return Spec{Namespace: namespace, ElectionID: CoordinatorElectionID, Identity: identity, Lock: LeaseLock}
}

// coordinate registers the coordinator as l's work: while l leads, a
// coordinated.Coordinator runs with watcher's default revision. It starts
// deciding once the watcher has read the cluster, so that a new
// coordinator never undoes a predecessor's decision for want of knowing
// the default.
func coordinate(l *LeaderElection, client kubernetes.Interface, watcher revisions.DefaultWatcher, o *options,
	decisions func(lease, decision string)) (*LeaderElection, error) {
	if !l.enabled {
		return nil, fmt.Errorf("election %q: a coordinator needs leader election enabled: WithEnabled(false) does not apply", CoordinatorElectionID)
	}
	var current atomic.Pointer[coordinated.Coordinator]
	watcher.AddHandler(func(string) {
		if c := current.Load(); c != nil {
			c.Trigger()
		}
	})
	l.Add(func(ctx context.Context) error {
		if !waitSynced(ctx, watcher) {
			return nil
		}
		c, err := coordinated.NewCoordinator(client, coordinated.CoordinatorConfig{
			Namespace: l.spec.Namespace,
			Default:   watcher.GetDefault,
			// A silent candidate must be skipped well within a lease, or a
			// dead better one would hold up every decision at a short ttl.
			AckTimeout: min(coordinated.DefaultAckTimeout, renewDeadlineOf(o)),
			Clock:      o.clock,
			Logger:     o.logger.Named("coordinator"),
			Metrics:    decisionsOf(decisions),
			Rosters:    o.shared.rosters,
		})
		if err != nil {
			return err
		}
		current.Store(c)
		defer current.Store(nil)
		return c.Run(ctx)
	})
	return l, nil
}

// decisionsOf passes the coordinator's decisions on to f as strings; nil
// when f is nil.
func decisionsOf(f func(lease, decision string)) func(string, coordinated.Decision) {
	if f == nil {
		return nil
	}
	return func(lease string, d coordinated.Decision) { f(lease, string(d)) }
}

// waitSynced waits until w has read the cluster; false when ctx ended
// first.
func waitSynced(ctx context.Context, w revisions.DefaultWatcher) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !w.HasSynced() {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// renewDeadlineOf is the renew deadline of o's timing (ttl/2 by default).
func renewDeadlineOf(o *options) time.Duration {
	_, renewDeadline, _ := o.durations()
	return renewDeadline
}
