package coordinated

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/meshd-io/meshd/internal/errlist"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// DefaultAckTimeout is how long the coordinator waits for a pinged
// candidate to renew before skipping it.
const DefaultAckTimeout = 2 * time.Second

// minWake is the shortest delay before the coordinator looks at a Lease
// again on its own.
const minWake = 10 * time.Millisecond

// Decision is a kind of write the coordinator makes to a Lease.
type Decision string

// Decisions, as passed to CoordinatorConfig.Metrics.
const (
	// DecisionAssign: a vacant Lease got a holder.
	DecisionAssign Decision = "assign"
	// DecisionPrefer: spec.preferredHolder named a better candidate.
	DecisionPrefer Decision = "prefer"
	// DecisionClear: spec.preferredHolder was removed, no longer justified.
	DecisionClear Decision = "clear"
	// DecisionStrategy: spec.strategy was set on a held Lease.
	DecisionStrategy Decision = "strategy"
)

// CoordinatorConfig configures a Coordinator.
type CoordinatorConfig struct {
	// Namespace whose Leases and LeaseCandidates are coordinated. Required.
	Namespace string
	// Default returns the mesh's default revision ("" when unknown). Call
	// Coordinator.Trigger when it changes. Nil means always "".
	Default func() string
	// Clock, nil for the real one.
	Clock clock.Clock
	// Logger, nil for none.
	Logger *zap.Logger
	// AckTimeout is how long a pinged candidate has to answer; zero means
	// DefaultAckTimeout.
	AckTimeout time.Duration
	// Metrics, if set, is called once per successful write of a Lease with
	// the kind of decision (one write may carry two: strategy and prefer).
	// It must be safe for concurrent use and return quickly.
	Metrics func(lease string, d Decision)
	// Rosters is where the coordinator gets its roster of the namespace's
	// candidates, shared with the candidates that use the same Rosters,
	// client and clock. Nil means a Rosters of its own.
	Rosters *Rosters
}

// Coordinator decides who holds the Leases of a namespace whose candidates
// all announce Strategy (others are left alone).
//
//   - A vacant Lease (absent, without holder, or expired) gets the best live
//     candidate that answers (see Roster.Ranked; stale candidates are
//     pinged first and skipped after AckTimeout). Expiry is judged by this
//     process alone: a Lease expires leaseDurationSeconds after this
//     process last saw its holder, renewTime or transitions change, on the
//     local clock; so a coordinator that has just started waits a full lease
//     before it calls a stale Lease expired, whatever the clocks of the
//     nodes say.
//   - A held, valid Lease of a prioritized election gets
//     spec.preferredHolder = the best live candidate that the steal rule
//     (priority.LocationPrioritizedComparison) lets take it from the
//     holder, and loses it when that no longer holds. The holder is never
//     replaced by the coordinator while valid: it must hand over itself.
//   - spec.strategy is set to Strategy on every Lease it coordinates.
//
// Every write uses optimistic concurrency on the cached Lease and keeps
// every field and annotation it does not own; a conflict is retried on the
// next event. Run one Coordinator per namespace in the cluster at a time
// (elect it); two would agree on decisions but race on writes.
type Coordinator struct {
	client   kubernetes.Interface
	cfg      CoordinatorConfig
	log      *zap.Logger
	running  sync.Once
	kick     chan struct{}
	mu       sync.Mutex
	dirty    map[string]bool
	all      bool
	leases   coordlisters.LeaseNamespaceLister
	roster   *Roster
	observed map[string]observation // owned by Run
	pinged   map[string]time.Time   // owned by Run
	wakeAt   map[string]time.Time   // owned by Run
}

// observation is when this process last saw a Lease's record change, and
// what it saw.
type observation struct {
	record string
	at     time.Time
	uid    types.UID     // of the Lease object that carried the record
	lease  time.Duration // the holder's announced lease
}

// NewCoordinator validates cfg and returns a Coordinator that has not
// started.
func NewCoordinator(client kubernetes.Interface, cfg CoordinatorConfig) (*Coordinator, error) {
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("client is nil"))
	}
	if cfg.Namespace == "" {
		errs = append(errs, errors.New("Namespace is required"))
	}
	if cfg.AckTimeout < 0 {
		errs = append(errs, fmt.Errorf("AckTimeout %v is negative", cfg.AckTimeout))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("coordinated: invalid coordinator: %w", errlist.Join(errs...))
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = DefaultAckTimeout
	}
	if cfg.Default == nil {
		cfg.Default = func() string { return "" }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Rosters == nil {
		cfg.Rosters = NewRosters()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = func(string, Decision) {}
	}
	return &Coordinator{
		client: client, cfg: cfg,
		log:      cfg.Logger.With(zap.String("namespace", cfg.Namespace)),
		kick:     make(chan struct{}, 1),
		dirty:    map[string]bool{},
		observed: map[string]observation{},
		pinged:   map[string]time.Time{},
		wakeAt:   map[string]time.Time{},
	}, nil
}

// Trigger makes Run look at every Lease again soon; call it when the
// default revision changes. It never blocks.
func (c *Coordinator) Trigger() {
	c.mu.Lock()
	c.all = true
	c.mu.Unlock()
	c.wake()
}

func (c *Coordinator) enqueue(lease string) {
	c.mu.Lock()
	c.dirty[lease] = true
	c.mu.Unlock()
	c.wake()
}

func (c *Coordinator) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run coordinates until ctx ends, then returns nil once everything it
// started has stopped. It returns an error only when called twice or when
// it cannot start its caches.
func (c *Coordinator) Run(ctx context.Context) error {
	first := false
	c.running.Do(func() { first = true })
	if !first {
		return errors.New("coordinated: Coordinator.Run called twice")
	}
	roster, release, err := c.cfg.Rosters.Acquire(c.client, c.cfg.Namespace, c.cfg.Clock)
	if err != nil {
		return err
	}
	defer release()
	c.roster = roster
	defer roster.SubscribeAll(c.enqueue)()

	factory := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(c.cfg.Namespace))
	leaseInformer := factory.Coordination().V1().Leases()
	reg, err := leaseInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueLease(obj) },
		UpdateFunc: func(_, obj any) { c.enqueueLease(obj) },
		DeleteFunc: func(obj any) { c.enqueueLease(obj) },
	})
	if err != nil {
		return fmt.Errorf("coordinated: watch leases: %w", err)
	}
	c.leases = leaseInformer.Lister().Leases(c.cfg.Namespace)
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced, roster.HasSynced) {
		return nil
	}
	c.log.Info("coordinating leases", zap.String("strategy", string(Strategy)))
	c.Trigger()
	c.loop(ctx)
	return nil
}

func (c *Coordinator) enqueueLease(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if l, ok := obj.(*coordinationv1.Lease); ok {
		c.enqueue(l.Name)
	}
}

// loop reconciles dirty and due Leases until ctx ends.
func (c *Coordinator) loop(ctx context.Context) {
	for {
		for _, name := range c.takeDirty() {
			delete(c.wakeAt, name)
			if wake := c.reconcile(ctx, name); !wake.IsZero() {
				c.wakeAt[name] = wake
			}
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if next, ok := c.nextWake(); ok {
			timer = c.cfg.Clock.NewTimer(next)
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-c.kick:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// takeDirty returns the Leases to look at now: those changed, those due,
// and all known after a Trigger.
func (c *Coordinator) takeDirty() []string {
	c.mu.Lock()
	names := c.dirty
	c.dirty = map[string]bool{}
	all := c.all
	c.all = false
	c.mu.Unlock()
	if all {
		for _, n := range c.roster.leaseNames() {
			names[n] = true
		}
	}
	now := c.cfg.Clock.Now()
	for n, at := range c.wakeAt {
		if !at.After(now) {
			names[n] = true
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	return out
}

// nextWake returns the delay until the earliest scheduled look.
func (c *Coordinator) nextWake() (time.Duration, bool) {
	var next time.Time
	for _, at := range c.wakeAt {
		next = earliest(next, at)
	}
	if next.IsZero() {
		return 0, false
	}
	return max(next.Sub(c.cfg.Clock.Now()), minWake), true
}
