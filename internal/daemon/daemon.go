// Package daemon wires meshd together: one shared default-revision watcher,
// one Prometheus registry, an event recorder, an election per selected kind
// with its controllers, and the monitoring endpoints.
//
// # Start and stop order
//
// New builds everything and validates the configuration; it starts nothing
// and does not contact the API server. Run then:
//
//  1. listens on the monitoring address (a port conflict fails Run at once);
//  2. starts the event broadcaster, the default-revision watcher and every
//     election, and serves the monitoring endpoints;
//  3. when ctx is cancelled: reports not ready; sets Config.ShutdownDeadline
//     (if any), after which every API request is cancelled; stops the
//     elections, each of which stops its controllers, waits for them (at
//     most half of ShutdownTimeout) and releases its lock; stops the
//     watcher; waits for all of that up to ShutdownTimeout; then stops
//     serving the endpoints and the event broadcaster.
//
// Run returns nil after a clean shutdown, and an error wrapping
// ErrShutdownTimeout when something did not stop in time; in that case
// goroutines may still be running, and the process should exit. Events still
// queued when the broadcaster stops are dropped, and a write already in
// flight may finish just after Run returns.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/controllers/revision"
	"github.com/meshd-io/meshd/internal/controllers/status"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/features"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// EventComponent is the source component of the Events meshd records.
const EventComponent = "meshd"

// ErrShutdownTimeout is wrapped by Run's error when the elections did not
// stop within Config.ShutdownTimeout.
var ErrShutdownTimeout = errors.New("shutdown timed out")

// Daemon is one meshd instance. Build it with New and call Run once. Its
// methods other than Run may be called at any time; Daemon implements
// monitoring.Source.
type Daemon struct {
	cfg      Config
	log      *zap.Logger
	registry *prometheus.Registry
	// metricsReg registers into registry with the revision label.
	metricsReg prometheus.Registerer
	recorder   *recorderProxy
	watcher    revisions.DefaultWatcher // nil when no election needs it
	runs       []*run
	monitor    *monitoring.Server
	ledger     *ledger.File // nil unless Config.LedgerFile is set

	started atomic.Bool
	state   atomic.Int32
}

// run is one election, with its controllers registered on it.
type run struct {
	election *election.LeaderElection
	// reporters are the controllers that can say why they do not do their
	// work (controllers.Reporter).
	reporters []controllers.Reporter
	done      atomic.Bool // RunContext has returned
}

const (
	stateNew int32 = iota
	stateRunning
	stateStopping
	stateStopped
)

var _ monitoring.Source = (*Daemon)(nil)

// New validates cfg and builds the daemon: registry, watcher, elections and
// controllers. It neither starts goroutines nor contacts the API server.
func New(cfg Config) (*Daemon, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Daemon{
		cfg:      cfg,
		log:      cfg.Logger,
		registry: prometheus.NewRegistry(),
		recorder: &recorderProxy{},
	}
	d.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Every series of meshd's own, of its elections and of its API
	// requests carries the revision of this instance.
	d.metricsReg = prometheus.WrapRegistererWith(prometheus.Labels{"revision": cfg.Revision}, d.registry)
	metrics, err := elector.NewPrometheusMetrics(d.metricsReg)
	if err != nil {
		return nil, fmt.Errorf("daemon: election metrics: %w", err)
	}
	if err := monitoring.RegisterClientMetrics(d.metricsReg); err != nil {
		return nil, fmt.Errorf("daemon: API request metrics: %w", err)
	}
	if cfg.LedgerFile != "" {
		if d.ledger, err = ledger.OpenFile(cfg.LedgerFile); err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
	}

	// One watcher serves every prioritized election: one watch instead of
	// one per election, and they all see the same default at once.
	if features.EnableLeaderElection.Get() && (d.selected(KindNamespace) || d.selected(KindStatus)) {
		d.watcher, err = revisions.NewDefaultWatcher(cfg.ElectionClient, revisions.Options{
			MeshNamespace: cfg.Namespace,
			WebhookName:   features.DefaultRevisionWebhook.Get(),
			RevisionLabel: features.RevisionLabel.Get(),
			Logger:        d.log,
		})
		if err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
	}

	opts := []election.Option{
		election.WithTTL(cfg.TTL),
		election.WithLogger(d.log),
		election.WithMetrics(metrics),
		election.WithEventRecorder(d.recorder),
		// Shutting down always hands the locks over at once.
		election.WithReleaseOnCancel(true),
		election.WithStopTimeout(min(features.LeaderElectionStopTimeout.Get(), cfg.ShutdownTimeout/2)),
	}
	if d.watcher != nil {
		opts = append(opts, election.WithDefaultWatcher(d.watcher))
	}
	for _, kind := range cfg.Kinds {
		r, err := d.newRun(kind, opts)
		if err != nil {
			return nil, fmt.Errorf("daemon: %s: %w", kind, err)
		}
		d.runs = append(d.runs, r)
		metrics.Init(r.election.Status().Name)
	}

	d.monitor, err = monitoring.New(monitoring.Options{Source: d, Gatherer: d.registry, Logger: d.log})
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	return d, nil
}

// newRun builds the election of kind and registers its controllers on it.
func (d *Daemon) newRun(kind Kind, opts []election.Option) (*run, error) {
	c := d.cfg
	var (
		le  *election.LeaderElection
		err error
	)
	switch kind {
	case KindNamespace:
		le, err = election.NewLeaderElectionMulticluster(c.Namespace, c.Identity, election.NamespaceController, c.Revision, c.Remote, c.ElectionClient, opts...)
	case KindStatus:
		le, err = election.NewLeaseLeaderElection(c.Namespace, c.Identity, status.ElectionID, c.Revision, c.ElectionClient, opts...)
	case KindRevision:
		le, err = election.NewPerRevisionLeaderElection(c.Namespace, c.Identity, revision.ElectionID, c.Revision, c.ElectionClient, opts...)
	default:
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	if err != nil {
		return nil, err
	}
	log := d.log.Named(string(kind))
	ctls, err := c.Controllers(kind, ControllerEnv{
		Client:         c.Client,
		Namespace:      c.Namespace,
		Identity:       c.Identity,
		Revision:       c.Revision,
		Remote:         c.Remote,
		SelfSignedRoot: c.SelfSignedRoot,
		Recorder:       d.recorder,
		Logger:         log,
		Registerer:     d.metricsReg,
	})
	if err != nil {
		return nil, fmt.Errorf("building controllers: %w", err)
	}
	r := &run{election: le}
	for _, ctl := range ctls {
		if rep, ok := ctl.(controllers.Reporter); ok {
			r.reporters = append(r.reporters, rep)
		}
		runCtl := ctl.Run
		if d.ledger != nil {
			runCtl = d.ledger.Wrap(le.Status().Name, c.Identity, runCtl)
		}
		le.AddRunFunctionContext(func(ctx context.Context) {
			runCtl(ctx)
			if ctx.Err() == nil {
				log.Warn("controller returned while still leading; it stays stopped until the next term",
					zap.String("controller", ctl.Name()))
			}
		})
	}
	return r, nil
}

func (d *Daemon) selected(kind Kind) bool {
	for _, k := range d.cfg.Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// Run runs the daemon until ctx is cancelled, then shuts it down as the
// package documentation describes. Call it once.
func (d *Daemon) Run(ctx context.Context) error {
	if !d.started.CompareAndSwap(false, true) {
		return errors.New("daemon: Run called more than once")
	}
	defer d.state.Store(stateStopped)
	if d.ledger != nil {
		defer d.ledger.Close()
	}

	ln := d.cfg.MonitoringListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", d.cfg.MonitoringAddress); err != nil {
			return fmt.Errorf("daemon: monitoring: %w", err)
		}
	}

	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	defer d.recorder.set(nil) // before Shutdown: late events are dropped here
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.cfg.Client.CoreV1().Events("")})
	d.recorder.set(broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent}))

	// The endpoints outlive the elections, so /debug/elections and /readyz
	// describe the shutdown too.
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	served := make(chan error, 1)
	go func() { served <- d.monitor.Serve(serveCtx, ln) }()

	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var wg sync.WaitGroup
	if d.watcher != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.watcher.Run(workCtx.Done())
		}()
	}
	for _, r := range d.runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.done.Store(true)
			r.election.RunContext(workCtx)
		}()
	}
	d.state.Store(stateRunning)
	d.log.Info("meshd running", zap.String("identity", d.cfg.Identity), zap.String("namespace", d.cfg.Namespace), zap.String("revision", d.cfg.Revision),
		zap.Bool("remote", d.cfg.Remote), zap.Duration("ttl", d.cfg.TTL), zap.Stringer("monitoring", ln.Addr()),
		zap.Strings("elections", d.electionIDs()))

	var errs []error
	select {
	case <-ctx.Done():
		d.log.Info("shutting down: stopping controllers and releasing locks", zap.Duration("timeout", d.cfg.ShutdownTimeout))
	case err := <-served:
		served = nil
		errs = append(errs, err)
		d.log.Error("monitoring server failed; shutting down", zap.Error(err))
	}
	d.state.Store(stateStopping)
	if d.cfg.ShutdownDeadline != nil {
		d.cfg.ShutdownDeadline.set(requestDeadline(time.Now(), d.cfg.ShutdownTimeout))
	}
	stopWork()

	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(stopped)
	}()
	timer := time.NewTimer(d.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
		d.log.Info("all elections stopped")
	case <-timer.C:
		err := fmt.Errorf("daemon: %w after %v; still running: %s", ErrShutdownTimeout, d.cfg.ShutdownTimeout, d.stillRunning())
		d.log.Error("shutdown did not finish in time", zap.Error(err))
		errs = append(errs, err)
	}

	stopServing()
	if served != nil {
		if err := <-served; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run builds a Daemon from cfg and runs it until ctx is cancelled.
func Run(ctx context.Context, cfg Config) error {
	d, err := New(cfg)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// Statuses returns the status of every election, in AllKinds order.
func (d *Daemon) Statuses() []election.Status {
	out := make([]election.Status, 0, len(d.runs))
	for _, r := range d.runs {
		out = append(out, r.election.Status())
	}
	return out
}

// Healthy returns an error naming every election this process leads without
// having renewed it for longer than TTL + HealthTolerance. Followers and
// disabled elections are always healthy.
func (d *Daemon) Healthy() error {
	var errs []error
	for _, r := range d.runs {
		el := r.election.Elector()
		if el == nil {
			continue
		}
		if err := el.Check(d.cfg.HealthTolerance); err != nil {
			errs = append(errs, fmt.Errorf("election %s: %w", r.election.ID(), err))
		}
	}
	return errors.Join(errs...)
}

// Ready returns nil while the elections are running and the default-revision
// watcher has synced, and otherwise says why the daemon is not ready.
func (d *Daemon) Ready() error {
	switch d.state.Load() {
	case stateNew:
		return errors.New("not started")
	case stateStopping, stateStopped:
		return errors.New("shutting down")
	}
	if d.watcher != nil && !d.watcher.HasSynced() {
		return errors.New("the default revision watcher has not synced")
	}
	var errs []error
	for _, r := range d.runs {
		for _, rep := range r.reporters {
			errs = append(errs, rep.Problem())
		}
	}
	return errors.Join(errs...)
}

// Elections returns every election as /debug/elections shows it, with this
// process's identity and what stops the work each one gates.
func (d *Daemon) Elections() []monitoring.Election {
	out := make([]monitoring.Election, 0, len(d.runs))
	for _, r := range d.runs {
		e := monitoring.Election{Status: r.election.Status(), Identity: r.election.Identity()}
		for _, rep := range r.reporters {
			if err := rep.Problem(); err != nil {
				e.Problems = append(e.Problems, err.Error())
			}
		}
		out = append(out, e)
	}
	return out
}

// Registry is the daemon's metrics registry, served on /metrics.
func (d *Daemon) Registry() *prometheus.Registry { return d.registry }

func (d *Daemon) electionIDs() []string {
	ids := make([]string, len(d.runs))
	for i, r := range d.runs {
		ids[i] = r.election.Status().Name
	}
	return ids
}

func (d *Daemon) stillRunning() string {
	var ids []string
	for _, r := range d.runs {
		if !r.done.Load() {
			ids = append(ids, r.election.ID())
		}
	}
	if len(ids) == 0 {
		return "the default revision watcher"
	}
	return strings.Join(ids, ", ")
}

// recorderProxy lets the elections, built by New, record events through the
// broadcaster that Run starts. Events recorded outside Run are dropped.
type recorderProxy struct {
	mu sync.RWMutex
	r  record.EventRecorder
}

func (p *recorderProxy) set(r record.EventRecorder) {
	p.mu.Lock()
	p.r = r
	p.mu.Unlock()
}

func (p *recorderProxy) Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any) {
	p.mu.RLock()
	r := p.r
	p.mu.RUnlock()
	if r != nil {
		r.Eventf(object, eventType, reason, messageFmt, args...)
	}
}
