package election

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/meshd-io/meshd/internal/election/identity"
	"github.com/meshd-io/meshd/internal/election/knobs"
	"github.com/meshd-io/meshd/internal/metrics"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// Defaults of the options. They are fixed: the library never reads the
// process environment. A program that wants the environment to decide
// passes features.ElectionOptions() to New or NewGroup.
const (
	// DefaultTTL is the lease duration; the renew deadline is half of it and
	// the retry period a quarter.
	DefaultTTL = 30 * time.Second
	// DefaultStopTimeout bounds the wait for run functions to return when a
	// term ends, before the lock is released anyway.
	DefaultStopTimeout = 5 * time.Second
	// DefaultHandoverGrace bounds how long a candidate waits for a holder to
	// honour a handover request before it takes the lock by force.
	DefaultHandoverGrace = 10 * time.Second
)

// The run back-off's defaults: the wait before contending again after a term
// ended by a failed run function (an error or a panic), doubling with each
// such term in a row, and its cap.
const (
	defaultRunBackoff    = time.Second
	defaultMaxRunBackoff = time.Minute
)

// Option customises an election, or every election of a Group.
type Option func(*options)

type options struct {
	ttl             time.Duration
	ttlSet          bool
	timing          *timing // withTiming; nil: split ttl
	logger          *zap.Logger
	clock           clock.WithTicker
	enabled         bool
	prioritized     bool
	defaultLock     LockKind
	releaseOnCancel bool
	stopTimeout     time.Duration
	watch           bool
	handover        bool
	handoverGrace   time.Duration
	startAtOnce     bool // after a forced steal, as istiod does
	backoff         time.Duration
	maxBackoff      time.Duration
	yieldStep       time.Duration // releaseYieldStep unless a test sets it

	watcher       revisions.DefaultWatcher
	webhookName   string
	revisionLabel string

	metrics       metrics.Metrics
	registerer    prometheus.Registerer
	eventRecorder resourcelock.EventRecorder
	eventClient   kubernetes.Interface

	sessions bool

	pod         *PodIdentity // WithPodIdentity
	podFailover bool         // WithPodFailover

	shared    *Shared // WithShared; filled in by New and NewGroup
	sharedSet bool

	binaryVersion  string                 // coordinated candidates
	candidateOwner *metav1.OwnerReference // coordinated candidates and sessions

	coordinator bool // the coordinator's own election (NewCoordinator)
	// given names the options passed for this election, in order, which
	// New refuses where they do not apply (see applies.go). Options given
	// to NewGroup or through Defaults are not in it.
	given []string
	// probe, set only by this package's tests, receives what build made.
	probe *buildProbe
}

// given records that the option name was passed; see options.given.
func (o *options) mark(name string) { o.given = append(o.given, name) }

func defaultOptions() options {
	return options{
		ttl:             DefaultTTL,
		logger:          zap.NewNop(),
		clock:           clock.RealClock{},
		enabled:         true,
		prioritized:     true,
		defaultLock:     ConfigMapLock,
		releaseOnCancel: true,
		stopTimeout:     DefaultStopTimeout,
		watch:           true,
		handover:        true,
		handoverGrace:   DefaultHandoverGrace,
		backoff:         defaultRunBackoff,
		maxBackoff:      defaultMaxRunBackoff,
		yieldStep:       releaseYieldStep,
	}
}

func (o *options) apply(opts []Option) {
	o.applyEach(opts)
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
}

func (o *options) applyEach(opts []Option) {
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
}

// Defaults applies opts as defaults: each takes effect on the elections it
// applies to, and one it does not apply to ignores it instead of refusing
// it, as the elections of a Group do with the options of NewGroup. It is
// for options that configure a whole program, such as
// features.ElectionOptions(); an option passed for one election on its own
// is checked strictly. Options after Defaults override its values.
func Defaults(opts ...Option) Option {
	return func(o *options) {
		n := len(o.given)
		o.applyEach(opts)
		o.given = o.given[:n]
	}
}

// validate reports every invalid option at once.
func (o *options) validate() error {
	var errs *multierror.Error
	add := func(format string, args ...any) { errs = multierror.Append(errs, fmt.Errorf(format, args...)) }
	switch t := o.timing; {
	case t != nil && o.ttlSet:
		add("WithTTL and testknobs.Timing both set: use one")
	case t != nil:
		if t.LeaseDuration < time.Second {
			add("lease duration %v is too short: at least 1s, the precision of the lock record", t.LeaseDuration)
		}
		if !(t.LeaseDuration > t.RenewDeadline && float64(t.RenewDeadline) > 1.2*float64(t.RetryPeriod) && t.RetryPeriod > 0) {
			add("timing %v/%v/%v: want LeaseDuration > RenewDeadline > 1.2 x RetryPeriod > 0", t.LeaseDuration, t.RenewDeadline, t.RetryPeriod)
		}
	case o.ttl < time.Second:
		add("ttl %v is too short: the LeaseDuration it gives must be at least 1s, the precision of the lock record", o.ttl)
	}
	if o.defaultLock != ConfigMapLock && o.defaultLock != LeaseLock {
		add("unknown default lock kind %q: want %s or %s", o.defaultLock, ConfigMapLock, LeaseLock)
	}
	if o.stopTimeout < 0 {
		add("stop timeout %v must not be negative", o.stopTimeout)
	}
	if o.handover && o.handoverGrace <= 0 {
		add("handover grace %v must be positive", o.handoverGrace)
	}
	if o.backoff <= 0 || o.maxBackoff < o.backoff {
		add("run back-off %v (at most %v) must be positive and not above its maximum", o.backoff, o.maxBackoff)
	}
	if o.yieldStep < 0 {
		add("release yield step %v must not be negative", o.yieldStep)
	}
	if o.webhookName != "" {
		if msgs := validation.IsDNS1123Subdomain(o.webhookName); len(msgs) > 0 {
			add("invalid default-revision webhook name %q: %s", o.webhookName, strings.Join(msgs, "; "))
		}
	}
	if o.revisionLabel != "" {
		if msgs := validation.IsQualifiedName(o.revisionLabel); len(msgs) > 0 {
			add("invalid revision label %q: %s", o.revisionLabel, strings.Join(msgs, "; "))
		}
	}
	if o.metrics != nil && o.registerer != nil {
		errs = multierror.Append(errs, errors.New("testknobs.Metrics and WithPrometheus both given: choose one"))
	}
	if o.sessions && !o.watch {
		add("WithSessions needs WithWatch(true): a holder learns through the watch that its lock was taken")
	}
	if o.eventRecorder != nil && o.eventClient != nil {
		errs = multierror.Append(errs, errors.New("testknobs.EventRecorder and WithEvents both given: choose one"))
	}
	if err := o.validatePod(); err != nil {
		errs = multierror.Append(errs, err)
	}
	if o.sharedSet && !o.shared.usable() {
		errs = multierror.Append(errs, errors.New("WithShared needs a Shared built by NewShared"))
	}
	return errs.ErrorOrNil()
}

// identity is the identity of an election of o whose Spec names none.
func (o *options) identity() string {
	if o.shared.usable() {
		return o.shared.Identity()
	}
	return identity.Draw() // only for a Spec refused by validate
}

// watcherOptions are the options of the default-revision watcher an
// election in namespace needs.
func (o *options) watcherOptions(namespace string) revisions.Options {
	return revisions.Options{
		MeshNamespace: namespace,
		WebhookName:   o.webhookName,
		RevisionLabel: o.revisionLabel,
		Logger:        o.logger,
	}
}

// WithTTL sets the lease duration (default DefaultTTL, at least 1s); the
// renew deadline is ttl/2 and the retry period ttl/4.
func WithTTL(ttl time.Duration) Option {
	return func(o *options) { o.ttl, o.ttlSet = ttl, true; o.mark("WithTTL") }
}

// withTiming sets the three durations apart instead of one ttl split in
// halves and quarters, for tests that need a lease much longer than the
// retry period (testknobs.Timing). They are validated together:
// leaseDuration ≥ 1s and leaseDuration > renewDeadline > 1.2 ×
// retryPeriod > 0. It cannot be combined with WithTTL.
func withTiming(leaseDuration, renewDeadline, retryPeriod time.Duration) Option {
	return func(o *options) {
		o.timing = &timing{LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod}
		o.mark("testknobs.Timing")
	}
}

// timing is the three durations of withTiming.
type timing struct{ LeaseDuration, RenewDeadline, RetryPeriod time.Duration }

// durations is the election's lease duration, renew deadline and retry
// period: withTiming's, or the ttl's split.
func (o *options) durations() (leaseDuration, renewDeadline, retryPeriod time.Duration) {
	if t := o.timing; t != nil {
		return t.LeaseDuration, t.RenewDeadline, t.RetryPeriod
	}
	return elector.TimingFromTTL(o.ttl)
}

// WithSessions makes the program's session renew the election's record
// while this instance leads, instead of one write per retry period per
// election (default false; see docs/sessions.md and package
// election/session). The elections of one Shared (of one Group) then keep
// one heartbeat Lease per namespace and ttl, named after their identity, which needs create, update
// and delete on Leases in the namespace. Use it only when every candidate
// of the election is a meshd that uses sessions: istiod, client-go and
// older meshd judge a holder by its record alone. A candidate that sees a
// holder without sessions renews its record itself from then on. Racing
// elections on a Lease lock only (a prioritized election that names no
// lock kind must name LeaseLock, or use WithDefaultLock(LeaseLock)); it
// needs WithWatch(true), and does not apply to coordinated elections.
// Given to NewGroup (or through Defaults), it applies to the elections of
// the group that fit, and the others renew their records themselves.
func WithSessions(enabled bool) Option {
	return func(o *options) { o.sessions = enabled; o.mark("WithSessions") }
}

// WithLogger sets the logger; default a no-op logger.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) { o.logger = l; o.mark("WithLogger") }
}

// WithEnabled(false) turns leader election off: run functions start at once
// and no lock is read or written, so nothing guarantees a single leader.
// Beside it only WithLogger and WithShared apply
// (the latter when the Spec names no identity).
// Default true. A program that lets ENABLE_LEADER_ELECTION decide uses
// features.ElectionOptions().
func WithEnabled(enabled bool) Option {
	return func(o *options) { o.enabled = enabled; o.mark("WithEnabled") }
}

// WithPrioritized(false) turns stealing off in prioritized elections: an
// instance of the default revision (or a local one) then waits for the lock
// like any other. Default true. It applies to elections that are not per
// revision (those never steal) and not the coordinator's.
func WithPrioritized(p bool) Option {
	return func(o *options) { o.prioritized = p; o.mark("WithPrioritized") }
}

// WithDefaultLock sets the lock kind of a prioritized election whose Spec
// names none, as NewLeaderElection and NewLeaderElectionMulticluster do.
// Default ConfigMapLock, which istiod uses. It applies only where it can
// decide: to a prioritized racing election whose Spec names no lock kind
// (per-revision and coordinated elections always use a Lease).
func WithDefaultLock(kind LockKind) Option {
	return func(o *options) { o.defaultLock = kind; o.mark("WithDefaultLock") }
}

// WithReleaseOnCancel sets whether a leader whose Run is stopped releases the
// lock, so that another candidate takes over at once instead of after the
// lease. Default true.
func WithReleaseOnCancel(r bool) Option {
	return func(o *options) { o.releaseOnCancel = r; o.mark("WithReleaseOnCancel") }
}

// WithStopTimeout sets how long the run functions may take to return when a
// term ends; default DefaultStopTimeout. The lock stays held and renewed
// until they have returned; past the timeout the instance logs it and fails
// its health check. It is capped at (LeaseDuration − RetryPeriod)/2, so that
// the stop a holder promises in a handover fits in its lease; zero means
// that cap.
func WithStopTimeout(d time.Duration) Option {
	return func(o *options) { o.stopTimeout = d; o.mark("WithStopTimeout") }
}

// WithWatch sets whether candidates follow the lock with a watch (true, the
// default) or poll it every retry period as client-go and istiod do (false).
func WithWatch(w bool) Option {
	return func(o *options) { o.watch = w; o.mark("WithWatch") }
}

// withStartAtOnceAfterSteal makes the run functions start as soon as the
// lock is taken by force from a holder that did not hand it over, as istiod
// does, instead of when the old holder's lease has run out by this
// instance's clock. It gives up the guarantee that the two never work at
// once, so only the benchmark (to measure istiod's behaviour) and the
// simulation use it, through package testknobs. It applies to racing,
// prioritized elections, the only ones that steal.
func withStartAtOnceAfterSteal(atOnce bool) Option {
	return func(o *options) { o.startAtOnce = atOnce; o.mark("testknobs.StartAtOnceAfterSteal") }
}

// WithHandover sets cooperative preemption: with enabled (the default), a
// candidate entitled to the lock asks a meshd holder to hand it over and
// waits up to grace (default DefaultHandoverGrace) before taking it by force.
// grace should exceed the stop timeout. It applies to racing, prioritized
// elections, the only ones in which a candidate takes the lock from its
// holder.
func WithHandover(enabled bool, grace time.Duration) Option {
	return func(o *options) { o.handover, o.handoverGrace = enabled, grace; o.mark("WithHandover") }
}

// withRunBackoff sets the wait before contending again after a term ended
// by a failed run function: initial after the first such term, doubling for
// each one in a row, at most max, in place of the defaults (1s and 1m) that
// tests shorten or lengthen through package testknobs. With elections
// enabled, the wait is never shorter than the RetryPeriod, so that failing
// work moves the lock at most once per RetryPeriod. The election is the one
// place that backs off: the elector beneath it contends as soon as it is
// asked to.
func withRunBackoff(initial, max time.Duration) Option {
	return func(o *options) { o.backoff, o.maxBackoff = initial, max; o.mark("testknobs.RunBackoff") }
}

// withReleaseYieldStep sets the step of releaseYield in place of
// releaseYieldStep, for tests of the order in which candidates take a
// released lock that must not depend on the host's scheduling.
func withReleaseYieldStep(step time.Duration) Option {
	return func(o *options) { o.yieldStep = step; o.mark("testknobs.ReleaseYieldStep") }
}

// WithDefaultWatcher makes prioritized elections read the default revision
// from w, which the caller runs. Without it, the prioritized elections of
// one Shared (of one Group, see WithShared) that read the same webhook and
// label through the same client share one watch of it, started with the
// first such election and stopped with the last; the caller need not build
// or run a watcher to share one. It applies to the elections that follow the
// default revision: prioritized ones (racing or coordinated) and the
// coordinator's.
func WithDefaultWatcher(w revisions.DefaultWatcher) Option {
	return func(o *options) { o.watcher = w; o.mark("WithDefaultWatcher") }
}

// WithRevisionWebhook names the MutatingWebhookConfiguration and its label
// that hold the default revision. Empty values keep istiod's conventions
// (see revisions.Options). It applies where WithDefaultWatcher does, and
// not beside it: the watcher given then decides.
func WithRevisionWebhook(name, label string) Option {
	return func(o *options) { o.webhookName, o.revisionLabel = name, label; o.mark("WithRevisionWebhook") }
}

// withMetrics sends what the elections do to m, for tests that count
// events (testknobs.Metrics); programs export the metrics with
// WithPrometheus.
func withMetrics(m metrics.Metrics) Option {
	return func(o *options) { o.metrics = m; o.mark("testknobs.Metrics") }
}

// WithPrometheus exports the election metrics (meshd_election_*) through reg.
// They are registered once: by New for a standalone election, by NewGroup
// for all elections of a group. Two standalone elections cannot share reg;
// put them in one Group.
func WithPrometheus(reg prometheus.Registerer) Option {
	return func(o *options) { o.registerer = reg; o.mark("WithPrometheus") }
}

// withEventRecorder records Kubernetes Events about the lock objects with
// r, for tests that read them back (testknobs.EventRecorder); programs use
// WithEvents.
func withEventRecorder(r resourcelock.EventRecorder) Option {
	return func(o *options) { o.eventRecorder = r; o.mark("testknobs.EventRecorder") }
}

// WithEvents records Kubernetes Events about the lock objects through
// client, from the component "meshd". The recorder runs while the
// election (or the Group) runs; events outside that time are dropped.
func WithEvents(client kubernetes.Interface) Option {
	return func(o *options) { o.eventClient = client; o.mark("WithEvents") }
}

// WithTestKnobs applies the settings that exist only for the module's own
// tests, benchmark and simulation (package internal/election/testknobs
// builds them; programs outside the module cannot build a knobs.Set). Each
// setting is checked where it applies as any option is, under its name
// "testknobs.<Name>".
func WithTestKnobs(k knobs.Set) Option {
	var opts []Option
	if k.StartAtOnceAfterSteal != nil {
		opts = append(opts, withStartAtOnceAfterSteal(*k.StartAtOnceAfterSteal))
	}
	if k.RunBackoff != nil {
		opts = append(opts, withRunBackoff(k.RunBackoff[0], k.RunBackoff[1]))
	}
	if k.Timing != nil {
		opts = append(opts, withTiming(k.Timing[0], k.Timing[1], k.Timing[2]))
	}
	if k.Metrics != nil {
		opts = append(opts, withMetrics(k.Metrics))
	}
	if k.EventRecorder != nil {
		opts = append(opts, withEventRecorder(k.EventRecorder))
	}
	if k.ReleaseYieldStep != nil {
		opts = append(opts, withReleaseYieldStep(*k.ReleaseYieldStep))
	}
	return func(o *options) { o.applyEach(opts) }
}
