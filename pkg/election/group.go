package election

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/go-multierror"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/pkg/resourcelock"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// Group runs the elections of one program together. Its elections share one
// Shared (a new one, or the one given to NewGroup with WithShared): one
// watch of the lock objects per namespace and lock kind, one session per
// namespace and ttl, one roster per namespace, one pacer of first attempts
// and one default identity. They also share one default-revision watcher
// per webhook (usually one in all), one metrics registration
// (WithPrometheus) and one event recorder (WithEvents), and Run returns once
// every one of them has stopped, and with them everything they shared.
//
// Build the group with NewGroup, its elections with Group.New, register
// their work, then call Run once. The group runs its elections: do not call
// their own Run.
type Group struct {
	client kubernetes.Interface
	base   options    // the group's options, with metrics and events resolved
	events *eventSink // nil without WithEvents
	// shared is what its elections share. Each watch, session and roster
	// in it stops with its last user, so once every election of the group
	// has returned, the group's part of it has stopped: Run has nothing
	// more to stop.
	shared *Shared

	mu        sync.Mutex
	watchers  map[watcherKey]revisions.DefaultWatcher
	elections []*LeaderElection
	started   bool
}

type watcherKey struct{ webhook, label string }

// NewGroup validates opts, the defaults of every election of the group,
// and registers the metrics if WithPrometheus is among them. Each of opts
// applies to the elections it fits (WithHandover to the prioritized ones,
// WithBinaryVersion to the coordinated ones, ...) and is not refused by
// the others; see Defaults. The group makes a
// Shared for its elections unless WithShared gives it one. It starts
// nothing.
// client may be nil only with WithEnabled(false).
func NewGroup(client kubernetes.Interface, opts ...Option) (*Group, error) {
	o := defaultOptions()
	o.apply(opts)
	err := o.validate()
	if err == nil && client == nil && o.enabled {
		err = errors.New("a Kubernetes client is required when leader election is enabled")
	}
	if err != nil {
		return nil, fmt.Errorf("election group: %w", err)
	}
	g := &Group{client: client, watchers: map[watcherKey]revisions.DefaultWatcher{}, shared: o.shared}
	if !o.sharedSet {
		g.shared = NewShared()
		o.shared = g.shared
	}
	if o.registerer != nil {
		m, err := newPrometheusMetrics(o.registerer)
		if err != nil {
			return nil, fmt.Errorf("election group: %w", err)
		}
		o.metrics, o.registerer = m, nil
	}
	if g.events = newEventSink(o.eventClient); g.events != nil {
		o.eventRecorder, o.eventClient = g.events, nil
	}
	// The group's options configure all its elections: each applies to
	// those it fits and is not refused by the others.
	o.given = nil
	g.base = o
	return g, nil
}

// EventRecorder records Events through the group's recorder (WithEvents)
// while the group runs, for work that reports on other objects; without
// WithEvents it drops them.
func (g *Group) EventRecorder() resourcelock.EventRecorder {
	if g.events == nil {
		return discardEvents{}
	}
	return g.events
}

// New adds an election to the group: spec with the group's options and then
// opts, validated as by the package-level New, which refuses an option of
// opts that does not apply to spec. WithPrometheus, WithEvents and
// WithShared belong to NewGroup and are refused here.
func (g *Group) New(spec Spec, opts ...Option) (*LeaderElection, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started {
		return nil, fmt.Errorf("election %q: the group is already running", spec.ElectionID)
	}
	o := g.base
	o.apply(opts)
	if o.registerer != nil || o.eventClient != nil || o.shared != g.shared {
		return nil, fmt.Errorf("election %q: WithPrometheus, WithEvents and WithShared apply to the whole group: pass them to NewGroup", spec.ElectionID)
	}
	raw := spec
	spec = spec.withDefaults(o.defaultLock, o.identity)
	o.fit(raw, spec)
	if err := validate(g.client, raw, spec, &o); err != nil {
		return nil, err
	}
	l, err := build(g.client, spec, &o, g.watcher)
	if err != nil {
		return nil, err
	}
	g.elections = append(g.elections, l)
	return l, nil
}

// watcher returns the group's watcher for the webhook of wo, building it on
// first use. The group runs it. Called with g.mu held.
func (g *Group) watcher(wo revisions.Options) (revisions.DefaultWatcher, bool, error) {
	key := watcherKey{wo.WebhookName, wo.RevisionLabel}
	if key.webhook == "" {
		key.webhook = revisions.DefaultWebhookName(wo.MeshNamespace)
	}
	if key.label == "" {
		key.label = revisions.DefaultRevisionLabel
	}
	if w, ok := g.watchers[key]; ok {
		return w, false, nil
	}
	w, err := g.shared.watchers.Watcher(g.client, wo)
	if err != nil {
		return nil, false, err
	}
	g.watchers[key] = w
	return w, false, nil
}

// members returns the group's elections in the order they were added.
func (g *Group) members() []*LeaderElection {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.elections)
}

// Run starts the event recorder, the watchers and every election, and runs
// them until ctx is cancelled. It returns once every election has stopped
// (each stops its run functions and releases its lock first), and then the
// watchers, the recorder and what the elections shared (the group's
// Shared runs nothing more, unless it was given to NewGroup and others use
// it). It returns ErrStarted when called a second time.
func (g *Group) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.started {
		g.mu.Unlock()
		return ErrStarted
	}
	g.started = true
	elections := slices.Clone(g.elections)
	watchers := make([]revisions.DefaultWatcher, 0, len(g.watchers))
	for _, w := range g.watchers {
		watchers = append(watchers, w)
	}
	g.mu.Unlock()

	defer g.events.start()()
	for _, w := range watchers {
		defer startWatcher(w)()
	}

	errs := make([]error, len(elections))
	var running sync.WaitGroup
	for i, l := range elections {
		running.Go(func() { errs[i] = l.RunContext(ctx) })
	}
	running.Wait()
	list := multierror.Append(nil, errs...) // nil errors are skipped
	list.ErrorFormat = joinErrors
	return list.ErrorOrNil()
}

// Synced reports whether every default-revision watcher of the group has
// read the cluster's state (see revisions.DefaultWatcher.HasSynced).
func (g *Group) Synced() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.watchers {
		if !w.HasSynced() {
			return false
		}
	}
	return true
}

// Running returns the lock names of the elections whose Run has not
// returned, for example to say what a slow shutdown waits for.
func (g *Group) Running() []string {
	var names []string
	for _, l := range g.members() {
		if l.running.Load() {
			names = append(names, l.lockName)
		}
	}
	return names
}
