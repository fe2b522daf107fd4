package election

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.uber.org/atomic"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/features"
	"github.com/meshd-io/meshd/pkg/resourcelock"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// LockKind names the object an election's record lives in.
type LockKind string

// Lock kinds, as reported by Status.
const (
	ConfigMapLock LockKind = "ConfigMap"
	LeaseLock     LockKind = "Lease"
)

// RunFunc is work gated by an election. stop is closed when leadership ends;
// the function should return soon after.
type RunFunc func(stop <-chan struct{})

// RunContextFunc is work gated by an election. ctx is cancelled when
// leadership ends; the function should return soon after.
type RunContextFunc func(ctx context.Context)

// LeaderElection is one candidacy in one election. Build it with one of the
// New* functions, register work with AddRunFunction, then call Run once.
type LeaderElection struct {
	id          string
	namespace   string
	lockName    string
	lockKind    LockKind
	identity    string
	candidate   Candidate
	perRevision bool
	prioritized bool
	enabled     bool
	log         *zap.Logger

	watcher      revisions.DefaultWatcher
	ownedWatcher bool
	elector      *elector.LeaderElector

	mu      sync.Mutex
	runFns  []RunContextFunc
	started bool

	cycle              atomic.Int32
	leading            atomic.Bool
	lastTransitionTime atomic.Time
}

// NewLeaderElection creates a prioritized election on the lock istiod uses
// for electionID: a ConfigMap named electionID in namespace (or a Lease, when
// PRIORITIZED_LEADER_ELECTION_LOCK=lease). An instance of the default revision
// takes the lock from instances of other revisions.
func NewLeaderElection(namespace, identity, electionID, revision string, client kubernetes.Interface, opts ...Option) (*LeaderElection, error) {
	return NewLeaderElectionMulticluster(namespace, identity, electionID, revision, false, client, opts...)
}

// NewLeaderElectionMulticluster is NewLeaderElection for an instance that may
// serve a remote cluster. A remote instance writes the key "^"+revision, and
// a local instance of the same revision takes the lock from it.
func NewLeaderElectionMulticluster(namespace, identity, electionID, revision string, remote bool, client kubernetes.Interface, opts ...Option) (*LeaderElection, error) {
	kind := ConfigMapLock
	if features.PrioritizedLeaderElectionLock.Get() == features.LockLease {
		kind = LeaseLock
	}
	return newElection(spec{namespace, identity, electionID, revision, remote, kind, false}, client, opts)
}

// NewLeaseLeaderElection creates a prioritized election on a Lease named
// electionID, with the holder key in the leader.istio.io/holder-key
// annotation.
func NewLeaseLeaderElection(namespace, identity, electionID, revision string, client kubernetes.Interface, opts ...Option) (*LeaderElection, error) {
	return newElection(spec{namespace, identity, electionID, revision, false, LeaseLock, false}, client, opts)
}

// NewPerRevisionLeaderElection creates an election with one leader per
// revision, on a Lease named <electionID>-<revision>. It never steals.
func NewPerRevisionLeaderElection(namespace, identity, electionID, revision string, client kubernetes.Interface, opts ...Option) (*LeaderElection, error) {
	return newElection(spec{namespace, identity, electionID, revision, false, LeaseLock, true}, client, opts)
}

type spec struct {
	namespace, identity, electionID, revision string
	remote                                    bool
	lockKind                                  LockKind
	perRevision                               bool
}

func newElection(s spec, client kubernetes.Interface, opts []Option) (*LeaderElection, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if s.revision == "" {
		s.revision = DefaultRevision
	}
	if s.identity == "" {
		s.identity = NewIdentity()
	}
	l := &LeaderElection{
		id:          s.electionID,
		namespace:   s.namespace,
		lockName:    s.electionID,
		lockKind:    s.lockKind,
		identity:    s.identity,
		candidate:   Candidate{Revision: s.revision, Remote: s.remote},
		perRevision: s.perRevision,
		prioritized: !s.perRevision && o.prioritized,
		enabled:     o.enabled,
		log:         o.logger,
	}
	if s.perRevision {
		l.lockName = s.electionID + "-" + s.revision
	}
	l.log = l.log.With(zap.String("election", l.id), zap.String("revision", s.revision), zap.Bool("remote", s.remote))

	var errs *multierror.Error
	if s.electionID == "" {
		errs = multierror.Append(errs, errors.New("election ID must not be empty"))
	}
	if msgs := validation.IsDNS1123Label(s.revision); len(msgs) > 0 {
		errs = multierror.Append(errs, fmt.Errorf("invalid revision %q: %s", s.revision, strings.Join(msgs, "; ")))
	}
	if client == nil && l.enabled {
		errs = multierror.Append(errs, errors.New("a Kubernetes client is required when leader election is enabled"))
	}
	if errs != nil {
		return nil, fmt.Errorf("election %q: %w", s.electionID, errs)
	}
	if !l.enabled {
		return l, nil
	}

	kind := resourcelock.ConfigMapsResourceLock
	if s.lockKind == LeaseLock {
		kind = resourcelock.LeasesResourceLock
	}
	cooperative := l.prioritized && o.handover
	lock, err := resourcelock.New(kind, s.namespace, l.lockName, client, resourcelock.Config{
		Identity:      s.identity,
		Key:           l.candidate.Key(),
		EventRecorder: o.eventRecorder,
		Cooperative:   cooperative,
	})
	if err != nil {
		return nil, fmt.Errorf("election %q: %w", s.electionID, err)
	}

	if l.prioritized {
		l.watcher = o.watcher
		if l.watcher == nil {
			l.watcher, err = revisions.NewDefaultWatcher(client, revisions.Options{
				MeshNamespace: s.namespace,
				WebhookName:   features.DefaultRevisionWebhook.Get(),
				RevisionLabel: features.RevisionLabel.Get(),
				Logger:        o.logger,
			})
			if err != nil {
				return nil, fmt.Errorf("election %q: %w", s.electionID, err)
			}
			l.ownedWatcher = true
		}
	}

	leaseDuration, renewDeadline, retryPeriod := elector.TimingFromTTL(o.ttl)
	cfg := elector.Config{
		Name:            l.lockName,
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: o.releaseOnCancel,
		StopTimeout:     o.stopTimeout,
		Clock:           o.clock,
		Metrics:         o.metrics,
		Logger:          o.logger,
		Watch:           o.watch,
		Callbacks: elector.Callbacks{
			OnStartedLeading: l.runLeading,
		},
	}
	if l.prioritized {
		cfg.KeyComparison = l.shouldSteal
	}
	if cooperative {
		cfg.HandoverGrace = o.handoverGrace
		cfg.AcceptHandover = l.shouldHandOver
	}
	l.elector, err = elector.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("election %q (ttl %v): %w", s.electionID, o.ttl, err)
	}
	if l.prioritized {
		// A new default may entitle this instance to the lock: try at once.
		l.watcher.AddHandler(func(string) { l.elector.Trigger() })
	}
	return l, nil
}

// shouldSteal applies the steal rule against the current default revision.
func (l *LeaderElection) shouldSteal(holderKey string) bool {
	return LocationPrioritizedComparison(holderKey, l.candidate, l.watcher.GetDefault())
}

// shouldHandOver tells a holder whether a candidate with candidateKey is
// entitled, by the steal rule and the current default revision, to the lock.
func (l *LeaderElection) shouldHandOver(candidateKey string) bool {
	return LocationPrioritizedComparison(l.candidate.Key(), ParseKey(candidateKey), l.watcher.GetDefault())
}

// AddRunFunction registers work that runs while this instance leads. It must
// be called before Run. It returns l for chaining.
func (l *LeaderElection) AddRunFunction(f RunFunc) *LeaderElection {
	return l.AddRunFunctionContext(func(ctx context.Context) { f(ctx.Done()) })
}

// AddRunFunctionContext is AddRunFunction for work that takes a context.
func (l *LeaderElection) AddRunFunctionContext(f RunContextFunc) *LeaderElection {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		l.log.Error("AddRunFunction called after Run; the function is ignored")
		return l
	}
	l.runFns = append(l.runFns, f)
	return l
}

// Run contends for leadership until stop is closed, re-contending after every
// lost term. While leading, every run function runs; when leadership ends
// they are stopped and awaited (up to the stop timeout) before the lock is
// released. Run returns only after everything it started has returned. Call
// it once.
func (l *LeaderElection) Run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	l.RunContext(ctx)
}

// RunContext is Run with a context instead of a stop channel.
func (l *LeaderElection) RunContext(ctx context.Context) {
	l.mu.Lock()
	if l.started {
		l.mu.Unlock()
		l.log.Error("Run called twice; the second call returns at once")
		return
	}
	l.started = true
	l.mu.Unlock()

	if !l.enabled {
		l.log.Info("leader election disabled; running all functions")
		l.cycle.Inc()
		l.runLeading(ctx)
		return
	}
	var wg sync.WaitGroup
	if l.ownedWatcher {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.watcher.Run(ctx.Done())
		}()
	}
	for ctx.Err() == nil {
		l.cycle.Inc()
		l.elector.Run(ctx)
	}
	wg.Wait()
}

// runLeading runs every run function until ctx ends and waits for them.
func (l *LeaderElection) runLeading(ctx context.Context) {
	l.mu.Lock()
	fns := append([]RunContextFunc(nil), l.runFns...)
	l.mu.Unlock()
	l.leading.Store(true)
	l.lastTransitionTime.Store(time.Now())
	defer func() {
		l.leading.Store(false)
		l.lastTransitionTime.Store(time.Now())
	}()
	var wg sync.WaitGroup
	for _, f := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx)
		}()
	}
	wg.Wait()
}

// IsLeader reports whether this instance leads, that is whether its run
// functions are running or about to run. With elections disabled it is true
// while Run is running.
func (l *LeaderElection) IsLeader() bool {
	if !l.enabled {
		return l.leading.Load()
	}
	return l.elector.IsLeader()
}

// Cycle counts how many times this instance has contended for leadership:
// 1 during the first contention, one more after each lost term.
func (l *LeaderElection) Cycle() int32 { return l.cycle.Load() }

// ID is the election ID.
func (l *LeaderElection) ID() string { return l.id }

// Identity is this instance's holder identity.
func (l *LeaderElection) Identity() string { return l.identity }

// Elector returns the low-level elector, nil when elections are disabled.
func (l *LeaderElection) Elector() *elector.LeaderElector { return l.elector }

// Status is a snapshot of an election as this instance sees it.
type Status struct {
	ID                 string    `json:"id"`
	Lock               LockKind  `json:"lock"`
	Namespace          string    `json:"namespace"`
	Name               string    `json:"name"`
	Leader             bool      `json:"leader"`
	Holder             string    `json:"holder"`
	HolderKey          string    `json:"holderKey"`
	Revision           string    `json:"revision"`
	Remote             bool      `json:"remote"`
	Cycle              int32     `json:"cycle"`
	Transitions        int       `json:"transitions"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	// LastError is why the latest attempt to acquire or renew failed, if it did.
	LastError string `json:"lastError,omitempty"`
}

// Status returns what this instance knows about its election.
func (l *LeaderElection) Status() Status {
	s := Status{
		ID:                 l.id,
		Lock:               l.lockKind,
		Namespace:          l.namespace,
		Name:               l.lockName,
		Leader:             l.IsLeader(),
		Revision:           l.candidate.Revision,
		Remote:             l.candidate.Remote,
		Cycle:              l.Cycle(),
		LastTransitionTime: l.lastTransitionTime.Load(),
	}
	if l.elector != nil {
		rec, _ := l.elector.Observed()
		s.Holder = rec.HolderIdentity
		s.HolderKey = rec.HolderKey
		s.Transitions = rec.LeaderTransitions
		if err := l.elector.LastError(); err != nil {
			s.LastError = err.Error()
		}
	}
	return s
}

func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return "unknown-" + host
}

// Option customises an election.
type Option func(*options)

type options struct {
	ttl             time.Duration
	watcher         revisions.DefaultWatcher
	logger          *zap.Logger
	metrics         elector.Metrics
	eventRecorder   resourcelock.EventRecorder
	enabled         bool
	prioritized     bool
	releaseOnCancel bool
	stopTimeout     time.Duration
	watch           bool
	handover        bool
	handoverGrace   time.Duration
	clock           clock.WithTicker
}

func defaultOptions() options {
	return options{
		ttl:             features.LeaderElectionTTL.Get(),
		logger:          zap.NewNop(),
		enabled:         features.EnableLeaderElection.Get(),
		prioritized:     features.PrioritizedLeaderElection.Get(),
		releaseOnCancel: features.LeaderElectionReleaseOnCancel.Get(),
		stopTimeout:     features.LeaderElectionStopTimeout.Get(),
		watch:           features.LeaderElectionWatch.Get(),
		handover:        features.LeaderElectionHandover.Get(),
		handoverGrace:   features.LeaderElectionHandoverGrace.Get(),
	}
}

// WithTTL sets the lease duration; the renew deadline is ttl/2 and the retry
// period ttl/4. Default: LEADER_ELECTION_TTL (30s).
func WithTTL(ttl time.Duration) Option { return func(o *options) { o.ttl = ttl } }

// WithDefaultWatcher shares a default-revision watcher between elections. The
// caller runs it. Without it, each prioritized election runs its own.
func WithDefaultWatcher(w revisions.DefaultWatcher) Option {
	return func(o *options) { o.watcher = w }
}

// WithLogger sets the logger.
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithMetrics sets where elector metrics go.
func WithMetrics(m elector.Metrics) Option { return func(o *options) { o.metrics = m } }

// WithEventRecorder records Kubernetes Events on the lock object.
func WithEventRecorder(r resourcelock.EventRecorder) Option {
	return func(o *options) { o.eventRecorder = r }
}

// WithEnabled overrides ENABLE_LEADER_ELECTION.
func WithEnabled(enabled bool) Option { return func(o *options) { o.enabled = enabled } }

// WithPrioritized overrides PRIORITIZED_LEADER_ELECTION for prioritized
// elections. Per-revision elections are never prioritized.
func WithPrioritized(p bool) Option { return func(o *options) { o.prioritized = p } }

// WithReleaseOnCancel overrides LEADER_ELECTION_RELEASE_ON_CANCEL.
func WithReleaseOnCancel(r bool) Option { return func(o *options) { o.releaseOnCancel = r } }

// WithStopTimeout overrides LEADER_ELECTION_STOP_TIMEOUT.
func WithStopTimeout(d time.Duration) Option { return func(o *options) { o.stopTimeout = d } }

// WithWatch overrides LEADER_ELECTION_WATCH: follow the lock with a watch
// (true) or poll it every retry period as client-go and istiod do (false).
func WithWatch(w bool) Option { return func(o *options) { o.watch = w } }

// WithHandover overrides LEADER_ELECTION_HANDOVER and
// LEADER_ELECTION_HANDOVER_GRACE: with enabled, a candidate entitled to the
// lock asks a meshd holder to hand it over and waits up to grace before
// taking it by force.
func WithHandover(enabled bool, grace time.Duration) Option {
	return func(o *options) { o.handover, o.handoverGrace = enabled, grace }
}

// WithClock sets the clock, for tests.
func WithClock(c clock.WithTicker) Option { return func(o *options) { o.clock = c } }
