package election

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/metrics"
	"github.com/meshd-io/meshd/internal/protocol/sessions"

	"github.com/meshd-io/meshd/internal/protocol/coordination"

	"github.com/hashicorp/go-multierror"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/election/priority"
	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/protocol/handover"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// LeaderElection is one candidacy in one election. Build it with New (or
// Group.New, or one of the istiod-style constructors), register work with Add
// or AddRunFunction, then call Run or RunContext once.
type LeaderElection struct {
	spec     Spec // defaulted
	lockName string
	// holderIdentity is what the lock names this instance by: the Spec's
	// Identity, or its LeaseCandidate's name in a coordinated election.
	holderIdentity string
	candidate      priority.Candidate
	prioritized    bool
	enabled        bool
	log            *zap.Logger
	clock          clock.WithTicker
	backoff        backoff
	yieldStep      time.Duration          // see releaseYield
	metrics        metrics.Metrics        // counts failed run functions; nil when disabled
	lock           resourcelock.Interface // records the Event of a failed run function; nil when disabled

	watcher      revisions.DefaultWatcher
	ownedWatcher bool       // watcher or coordinatorWatcher is run by this election, not by a Group or the caller
	events       *eventSink // started by this election; nil in a Group
	elector      *elector.LeaderElector
	session      *session.Member // WithSessions only
	pod          *podAware       // WithPodIdentity, WithPodFailover
	sessionWait  time.Duration   // how long Run waits for the session's first heartbeat
	candidacy    *candidacy      // coordinated elections only
	coordLock    *preferredLock  // coordinated elections only
	// coordinatorWatcher is the default watcher a coordinator election's
	// coordinator follows.
	coordinatorWatcher revisions.DefaultWatcher

	mu       sync.Mutex
	runFns   []RunFunc
	started  bool
	term     *termRun // the contention in progress
	lastErr  error    // of the latest failed run function
	failures int      // terms ended by a failed run function

	running        atomic.Bool
	cycle          atomic.Int32
	leading        atomic.Bool
	lastTransition atomic.Pointer[time.Time]
}

// New validates spec and opts and builds an election. It reports every
// invalid field of both at once, starts nothing and does not contact the
// API server. client may be nil only with WithEnabled(false).
func New(client kubernetes.Interface, spec Spec, opts ...Option) (*LeaderElection, error) {
	o := defaultOptions()
	o.apply(opts)
	if !o.sharedSet {
		o.shared = NewShared() // of this election alone
	}
	raw := spec
	spec = spec.withDefaults(o.defaultLock, o.identity)
	o.fit(raw, spec)
	if err := validate(client, raw, spec, &o); err != nil {
		return nil, err
	}
	var events *eventSink
	if o.enabled {
		if o.registerer != nil {
			m, err := newPrometheusMetrics(o.registerer)
			if err != nil {
				return nil, fmt.Errorf("election %q: %w", spec.ElectionID, err)
			}
			o.metrics, o.registerer = m, nil
		}
		if events = newEventSink(o.eventClient); events != nil {
			o.eventRecorder, o.eventClient = events, nil
		}
	}
	l, err := build(client, spec, &o, func(wo revisions.Options) (revisions.DefaultWatcher, bool, error) {
		w, err := o.shared.watchers.Watcher(client, wo)
		return w, true, err
	})
	if err != nil {
		return nil, err
	}
	l.events = events
	return l, nil
}

// validate reports every problem of a spec (raw as given, spec with its
// defaults) and of o at once, including every option given for this
// election that does not apply to it.
func validate(client kubernetes.Interface, raw, spec Spec, o *options) error {
	errs := multierror.Append(nil, spec.validate(), o.validate(), o.inapplicable(raw, spec))
	if client == nil && o.enabled {
		errs = multierror.Append(errs, errors.New("a Kubernetes client is required when leader election is enabled"))
	}
	if errs.ErrorOrNil() == nil {
		return nil
	}
	errs.ErrorFormat = joinErrors
	return fmt.Errorf("election %q: %w", spec.ElectionID, errs)
}

// lastTransitionTime is when this instance last started or stopped leading;
// zero before the first time.
func (l *LeaderElection) lastTransitionTime() time.Time {
	if t := l.lastTransition.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

func joinErrors(errs []error) string {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// watcherSource returns the default-revision watcher for the given options,
// and whether the election runs it.
type watcherSource func(revisions.Options) (w revisions.DefaultWatcher, owned bool, err error)

// build makes the election of a validated spec. o.metrics,
// o.eventRecorder and o.shared are final; newWatcher supplies the
// default-revision watcher unless o names one.
func build(client kubernetes.Interface, spec Spec, o *options, newWatcher watcherSource) (*LeaderElection, error) {
	l := &LeaderElection{
		spec:           spec,
		lockName:       spec.lockName(),
		holderIdentity: spec.Identity,
		candidate:      priority.Candidate{Revision: spec.Revision, Remote: spec.Remote},
		prioritized:    !spec.PerRevision && o.prioritized,
		enabled:        o.enabled,
		clock:          o.clock,
		backoff:        backoff{initial: o.backoff, max: o.maxBackoff},
		yieldStep:      o.yieldStep,
	}
	l.log = o.logger.With(zap.String("election", l.lockName), zap.String("revision", spec.Revision), zap.Bool("remote", spec.Remote))
	if !l.enabled {
		return l, nil
	}
	fail := func(err error) (*LeaderElection, error) {
		return nil, fmt.Errorf("election %q: %w", spec.ElectionID, err)
	}

	kind := resourcelock.ConfigMapsResourceLock
	if spec.Lock == LeaseLock {
		kind = resourcelock.LeasesResourceLock
	}
	cooperative := l.prioritized && o.handover && !spec.Mode.coordinatedMode()
	l.prepareCandidacy(client, o)
	pod, err := newPodAware(client, o, l.log)
	if err != nil {
		return fail(err)
	}
	l.pod = pod
	lockConfig := resourcelock.Config{
		Identity:      l.holderIdentity,
		Key:           l.candidate.Key(),
		EventRecorder: o.eventRecorder,
		Cooperative:   cooperative,
		HolderPod:     l.pod.source(l.leading.Load),
	}
	lock, err := resourcelock.New(kind, spec.Namespace, l.lockName, client, lockConfig)
	if err != nil {
		return fail(err)
	}
	l.pod.follow(client, o, lock, l.log)
	if ll, ok := lock.(*resourcelock.LeaseLock); ok && l.candidacy != nil {
		l.coordLock = &preferredLock{LeaseLock: ll}
		lock = l.coordLock
	}
	if l.prioritized {
		if l.watcher = o.watcher; l.watcher == nil {
			if l.watcher, l.ownedWatcher, err = newWatcher(o.watcherOptions(spec.Namespace)); err != nil {
				return fail(err)
			}
		}
	}
	if o.sessions {
		leaseDuration, renewDeadline, retryPeriod := o.durations()
		cfg := session.Config{
			Client: client, Namespace: spec.Namespace, Identity: l.holderIdentity,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Owner: o.candidateOwner, Clock: o.clock, Logger: o.logger, Sessions: o.shared.sessions,
		}
		o.probe.session(cfg)
		if l.session, err = session.NewMember(cfg); err != nil {
			return fail(err)
		}
		l.sessionWait = retryPeriod
	}
	// The election alone supervises the run functions: after a term that a
	// failure ended it waits at least a RetryPeriod, so that failing work
	// moves the lock at most once per RetryPeriod.
	_, _, retryPeriod := o.durations()
	l.backoff.initial = max(l.backoff.initial, retryPeriod)
	l.backoff.max = max(l.backoff.max, l.backoff.initial)
	l.metrics, l.lock = o.metrics, lock
	electorConfig := l.electorConfig(lock, o, cooperative)
	o.probe.elector(electorConfig, lockConfig)
	if l.elector, err = elector.New(electorConfig); err != nil {
		leaseDuration, renewDeadline, retryPeriod := o.durations()
		return nil, fmt.Errorf("election %q (lease %v, renew deadline %v, retry period %v): %w", spec.ElectionID, leaseDuration, renewDeadline, retryPeriod, err)
	}
	if l.session != nil {
		l.session.SetWake(l.elector.Trigger) // a holder's session ended: try at once
	}
	l.pod.setWake(l.elector.Trigger) // a holder's process exited: try at once
	if l.prioritized && l.candidacy == nil {
		// A new default may entitle this instance to the lock: try at once.
		l.watcher.AddHandler(func(string) { l.elector.Trigger() })
	}
	return l, nil
}

// prepareCandidacy makes a coordinated election's LeaseCandidate, whose
// name is the identity the Lease names the holder by.
func (l *LeaderElection) prepareCandidacy(client kubernetes.Interface, o *options) {
	if !l.spec.Mode.coordinatedMode() {
		return
	}
	l.holderIdentity = coordinated.CandidateName(l.lockName, l.spec.Identity)
	leaseDuration, _, _ := o.durations()
	l.candidacy = newCandidacy(client, l.spec, l.lockName, l.holderIdentity, o, leaseDuration, l.log)
}

func (l *LeaderElection) electorConfig(lock resourcelock.Interface, o *options, cooperative bool) elector.Config {
	leaseDuration, renewDeadline, retryPeriod := o.durations()
	cfg := elector.Config{
		Name:            l.lockName,
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: o.releaseOnCancel,
		StopTimeout:     fitStopTimeout(o.stopTimeout, leaseDuration, retryPeriod),
		Clock:           o.clock,
		Metrics:         o.metrics,
		Logger:          o.logger,
		Watch:           o.watch,
		Hub:             o.shared.hub,
		Pacer:           o.shared.pacer,

		StartAtOnceAfterSteal: o.startAtOnce,
		Callbacks:             elector.Callbacks{OnStartedLeading: l.runLeading},
	}
	if sl, ok := lock.(sessions.Lock); ok && l.session != nil {
		cfg.Session = sessions.New(sessions.Config{Name: cfg.Name, Heartbeat: l.session, Lock: sl, RetryPeriod: retryPeriod, Logger: o.logger})
	}
	cfg.HolderExit = l.pod.hook()
	switch {
	case l.candidacy != nil:
		cfg.Coordination = coordination.New(coordination.Config{
			Live: l.candidacy.live,
			Successor: func() (string, string, bool) {
				if l.spec.Mode == OldestEmulationVersion {
					return l.candidacy.oldestSuccessor()
				}
				return l.candidacy.successor(l.defaultRevision())
			},
			LeaseDuration: leaseDuration, YieldDelay: l.releaseYield,
		})
		cfg.YieldOnRelease = l.releaseYield // ranks the fallback when no coordinator decides
	case l.prioritized:
		cfg.KeyComparison = l.shouldSteal
		cfg.YieldOnRelease = l.releaseYield
	default:
		cfg.YieldOnRelease = l.releaseYield
	}
	if hl, ok := lock.(lockcap.HandoverLock); ok && cooperative {
		cfg.Handover = handover.New(handover.Config{
			Name: cfg.Name, Lock: hl,
			Grace:    max(o.handoverGrace, 2*retryPeriod), // a polling holder answers within a RetryPeriod
			Accept:   l.shouldHandOver,
			Outranks: cfg.KeyComparison, YieldDelay: cfg.YieldOnRelease,
			LeaseDuration: leaseDuration, RetryPeriod: retryPeriod,
			Logger: o.logger, Metrics: o.metrics,
		})
	}
	return cfg
}

// fitStopTimeout caps the wait for run functions at half of LeaseDuration −
// RetryPeriod, so that the stop a holder promises in its handover answer fits
// in its lease even at a small ttl.
func fitStopTimeout(stop, leaseDuration, retryPeriod time.Duration) time.Duration {
	return min(stop, (leaseDuration-retryPeriod)/2)
}

// shouldSteal applies the steal rule against the current default revision.
func (l *LeaderElection) shouldSteal(holderKey string) bool {
	return priority.LocationPrioritizedComparison(holderKey, l.candidate, l.watcher.GetDefault())
}

// shouldHandOver tells a holder whether a candidate with candidateKey is
// entitled, by the steal rule and the current default revision, to the lock.
func (l *LeaderElection) shouldHandOver(candidateKey string) bool {
	return priority.LocationPrioritizedComparison(l.candidate.Key(), priority.ParseKey(candidateKey), l.watcher.GetDefault())
}

// IsLeader reports whether this instance leads, that is whether its run
// functions are running or about to run. With elections disabled it is true
// while the run functions run.
func (l *LeaderElection) IsLeader() bool {
	if !l.enabled {
		return l.leading.Load()
	}
	return l.elector.IsLeader()
}

// electionID is the election ID, as in Status().ID.
func (l *LeaderElection) electionID() string { return l.spec.ElectionID }

// Identity is this instance's holder identity.
func (l *LeaderElection) Identity() string { return l.spec.Identity }

// Check is a health check: it returns an error when this instance leads but
// has not renewed its lock for longer than the lease plus tolerance, which
// means others may lead too and this process is stuck. Followers and
// disabled elections are healthy.
func (l *LeaderElection) Check(tolerance time.Duration) error {
	if !l.enabled {
		return nil
	}
	return l.elector.Check(tolerance)
}

// Status is a snapshot of an election as this instance sees it.
type Status struct {
	ID        string   `json:"id"`
	Lock      LockKind `json:"lock"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Leader    bool     `json:"leader"`
	Holder    string   `json:"holder"`
	HolderKey string   `json:"holderKey"`
	Revision  string   `json:"revision"`
	// DefaultRevision is the default revision as this instance sees it,
	// which ranks the candidates of a prioritized election; "" when none
	// is known or the election does not follow it (per revision).
	DefaultRevision    string    `json:"defaultRevision,omitempty"`
	Remote             bool      `json:"remote"`
	Cycle              int32     `json:"cycle"`
	Transitions        int       `json:"transitions"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	// LastError is why the latest attempt to acquire or renew failed, if it did.
	LastError string `json:"lastError,omitempty"`
	// RunFailures counts terms ended by a run function's error or panic.
	RunFailures int `json:"runFailures"`
	// LastRunError is the latest such error.
	LastRunError string `json:"lastRunError,omitempty"`
	// Mode is how the candidates agree on a leader (Spec.Mode).
	Mode Mode `json:"mode"`
	// Strategy is the coordinated lease strategy of a coordinated mode; ""
	// when racing.
	Strategy string `json:"strategy,omitempty"`
	// PreferredHolder is, in a coordinated mode, the candidate a coordinator
	// named in the Lease last seen (spec.preferredHolder); "" when none.
	PreferredHolder string `json:"preferredHolder,omitempty"`
	// Session is the session Lease that renews this instance's record
	// while it leads (WithSessions); "" without sessions.
	Session string `json:"session,omitempty"`
	// SessionFallback is set when this instance renews its record itself
	// although it has a session, because it saw a holder without sessions.
	SessionFallback bool `json:"sessionFallback,omitempty"`
}

// Status returns what this instance knows about its election.
func (l *LeaderElection) Status() Status {
	s := Status{
		ID:                 l.spec.ElectionID,
		Lock:               l.spec.Lock,
		Namespace:          l.spec.Namespace,
		Name:               l.lockName,
		Leader:             l.IsLeader(),
		Revision:           l.candidate.Revision,
		DefaultRevision:    l.defaultRevision(),
		Remote:             l.candidate.Remote,
		Cycle:              l.cycle.Load(),
		LastTransitionTime: l.lastTransitionTime(),
		Mode:               l.spec.Mode,
	}
	if l.spec.Mode.coordinatedMode() {
		s.Strategy = string(l.spec.Mode.strategy())
	}
	if l.coordLock != nil {
		s.PreferredHolder = l.coordLock.lastPreferred()
	}
	if l.session != nil {
		s.Session = l.session.LeaseName()
		s.SessionFallback = l.elector.SessionFallback()
	}
	l.mu.Lock()
	s.RunFailures = l.failures
	if l.lastErr != nil {
		s.LastRunError = l.lastErr.Error()
	}
	l.mu.Unlock()
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
