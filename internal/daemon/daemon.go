// Package daemon wires meshd together: one election group (sharing one
// default-revision watcher, the Prometheus registry and an event recorder)
// with an election per selected kind and its controllers, and the monitoring
// endpoints. The environment configures the elections through
// features.ElectionOptions, applied here.
//
// # Start and stop order
//
// New builds everything and validates the configuration; it starts nothing
// and does not contact the API server. Run then:
//
//  1. listens on the monitoring address (a port conflict fails Run at once);
//  2. runs the election group (the event broadcaster, the default-revision
//     watcher and every election) and serves the monitoring endpoints;
//     with Config.Multicluster also watches the remote cluster Secrets and
//     runs each remote cluster's election group as it appears (and stops
//     it, releasing its lock, as it goes);
//  3. when ctx is cancelled: reports not ready; sets Config.ShutdownDeadline
//     (if any), after which every API request is cancelled; stops the
//     group, whose elections each stop their controllers, wait for them (at
//     most half of ShutdownTimeout) and release their locks, after which the
//     watcher and the event broadcaster stop; waits for all of that up to
//     ShutdownTimeout; then stops serving the endpoints.
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

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/controllers/revision"
	"github.com/meshd-io/meshd/internal/controllers/status"
	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/internal/multicluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/features"
)

// EventComponent is the source component of the Events meshd records: its
// elections' and its controllers', all through the Group's recorder
// (election.WithEvents records from "meshd").
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
	// revisionReg registers into registry with the revision label;
	// metricsReg adds the label cluster, this instance's own cluster.
	revisionReg prometheus.Registerer
	metricsReg  prometheus.Registerer
	group       *election.Group
	mode        election.Mode              // of the Lease elections, after the fallback
	elections   []*election.LeaderElection // the coordinator's (if any), then in Config.Kinds order
	// reporters are, per election, the controllers that can say why they
	// do not do their work (controllers.Reporter).
	reporters [][]controllers.Reporter
	monitor   *monitoring.Server
	ledger    *ledger.File // nil unless Config.LedgerFile is set
	// clusters and watcher are the remote clusters, with Multicluster.
	clusters *clusterSet
	watcher  *multicluster.Watcher

	started atomic.Bool
	state   atomic.Int32
}

const (
	stateNew int32 = iota
	stateRunning
	stateStopping
	stateStopped
)

var _ monitoring.ClusterSource = (*Daemon)(nil)

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
	}
	d.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Every series of meshd's own, of its elections and of its API
	// requests carries the revision of this instance; those of its
	// elections and controllers also the cluster they work in. API
	// requests have their server's host instead.
	d.revisionReg = prometheus.WrapRegistererWith(prometheus.Labels{"revision": cfg.Revision}, d.registry)
	d.metricsReg = prometheus.WrapRegistererWith(prometheus.Labels{"cluster": cfg.ClusterID}, d.revisionReg)
	if err := monitoring.RegisterClientMetrics(d.revisionReg); err != nil {
		return nil, fmt.Errorf("daemon: API request metrics: %w", err)
	}
	var err error
	if cfg.LedgerFile != "" {
		if d.ledger, err = ledger.OpenFile(cfg.LedgerFile); err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
	}

	// The environment first, then what the daemon decides. The group gives
	// every prioritized election one watcher: one watch instead of one per
	// election, and they all see the same default at once.
	opts := append(features.ElectionOptions(),
		election.WithTTL(cfg.TTL),
		election.WithLogger(d.log),
		election.WithPrometheus(d.metricsReg),
		election.WithEvents(cfg.Client),
		// Shutting down always hands the locks over at once.
		election.WithReleaseOnCancel(true),
		election.WithStopTimeout(min(features.LeaderElectionStopTimeout.Get(), cfg.ShutdownTimeout/2)),
	)
	if d.group, err = election.NewGroup(cfg.ElectionClient, opts...); err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if err := d.setUpCoordination(); err != nil {
		return nil, fmt.Errorf("daemon: coordinator: %w", err)
	}
	if cfg.Sessions && d.mode != election.Racing {
		d.log.Warn("sessions apply to racing elections only; the elections renew their records themselves", zap.String("mode", string(d.mode)))
	}
	for _, kind := range cfg.Kinds {
		le, reporters, err := d.newElection(kind)
		if err != nil {
			return nil, fmt.Errorf("daemon: %s: %w", kind, err)
		}
		d.elections = append(d.elections, le)
		d.reporters = append(d.reporters, reporters)
	}

	if cfg.Multicluster {
		d.clusters = newClusterSet(d)
		d.watcher = multicluster.NewWatcher(cfg.Client, cfg.Namespace, cfg.ClusterID, d.clusters, d.log.Named("multicluster"))
	}

	d.monitor, err = monitoring.New(monitoring.Options{Source: d, Gatherer: d.registry, Logger: d.log})
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	return d, nil
}

// newElection builds the election of kind in the group and registers its
// controllers on it. It returns the controllers that report problems.
func (d *Daemon) newElection(kind Kind) (*election.LeaderElection, []controllers.Reporter, error) {
	c := d.cfg
	spec := election.Spec{Namespace: c.Namespace, Identity: c.Identity, Revision: c.Revision}
	switch kind {
	case KindNamespace:
		spec.ElectionID, spec.Remote = election.NamespaceController, c.Remote
	case KindStatus:
		spec.ElectionID, spec.Lock, spec.Mode = status.ElectionID, election.LeaseLock, d.mode
	case KindRevision:
		spec.ElectionID, spec.PerRevision, spec.Mode = revision.ElectionID, true, d.mode
	default:
		return nil, nil, fmt.Errorf("unknown kind %q", kind)
	}
	// Each election gets only the options that apply to it: New refuses
	// the others. Without leader election none of them does.
	var opts []election.Option
	elected := features.EnableLeaderElection.Get()
	switch {
	case !elected:
	case spec.Mode != "" && spec.Mode != election.Racing:
		opts = append(opts, election.WithCandidateOwner(c.Pod), election.WithBinaryVersion(c.BinaryVersion))
	case c.Sessions && kind != KindNamespace:
		opts = append(opts, election.WithSessions(true), election.WithCandidateOwner(c.Pod))
	}
	le, err := d.group.New(spec, opts...)
	if err != nil {
		return nil, nil, err
	}
	log := d.log.Named(string(kind))
	ctls, err := c.Controllers(kind, ControllerEnv{
		Client:             c.Client,
		Cluster:            c.ClusterID,
		Namespace:          c.Namespace,
		Identity:           c.Identity,
		Revision:           c.Revision,
		Remote:             c.Remote,
		SelfSignedRoot:     c.SelfSignedRoot,
		ClusterTrustBundle: c.ClusterTrustBundle,
		Recorder:           d.group.EventRecorder(),
		Logger:             log,
		Registerer:         d.metricsReg,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("building controllers: %w", err)
	}
	var reporters []controllers.Reporter
	for _, ctl := range ctls {
		if rep, ok := ctl.(controllers.Reporter); ok {
			reporters = append(reporters, rep)
		}
		runCtl := ctl.Run
		if d.ledger != nil {
			runCtl = d.ledger.Wrap(d.ledgerName(c.ClusterID, le.Status().Name), c.Identity, runCtl)
		}
		// A controller that returns while leading fails the term: the lock
		// goes to another instance, or back to this one after a back-off.
		le.Add(controllers.RunFunc(ctl, runCtl))
	}
	return le, reporters, nil
}

// ledgerName is how the ledger names the election whose lock is lock, in
// cluster: the lock's name, prefixed by the cluster's ID when the daemon
// works in several clusters, so that the terms of one cluster's lock, from
// every process, fall into one election.
func (d *Daemon) ledgerName(cluster, lock string) string {
	if !d.cfg.Multicluster {
		return lock
	}
	return cluster + "/" + lock
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

	ln, err := d.listen()
	if err != nil {
		return err
	}

	// The endpoints outlive the elections, so /debug/elections and /readyz
	// describe the shutdown too.
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	served := make(chan error, 1)
	go func() { served <- d.monitor.Serve(serveCtx, ln) }()

	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	stopped := make(chan error, 1)
	go func() { stopped <- d.runWork(workCtx) }()
	d.state.Store(stateRunning)
	d.log.Info("meshd running", zap.String("identity", d.cfg.Identity), zap.String("namespace", d.cfg.Namespace), zap.String("revision", d.cfg.Revision),
		zap.String("cluster", d.cfg.ClusterID), zap.Bool("remote", d.cfg.Remote), zap.Bool("multicluster", d.cfg.Multicluster),
		zap.Duration("ttl", d.cfg.TTL), zap.Stringer("monitoring", ln.Addr()), zap.Strings("elections", d.electionIDs()))

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

	if err := d.awaitStopped(stopped); err != nil {
		errs = append(errs, err)
	}

	stopServing()
	if served != nil {
		if err := <-served; err != nil {
			errs = append(errs, err)
		}
	}
	return errlist.Join(errs...)
}

// runWork runs the elections of this cluster and, with Multicluster, the
// Secret watcher and the remote clusters it finds, until ctx ends; it
// returns once all of them have stopped.
func (d *Daemon) runWork(ctx context.Context) error {
	if d.watcher == nil {
		return d.group.Run(ctx)
	}
	d.clusters.start(ctx)
	var (
		wg       sync.WaitGroup
		localErr error
	)
	wg.Go(func() { localErr = d.group.Run(ctx) })
	// Updates come from the watcher only: once it has returned, none
	// starts another cluster.
	wg.Go(func() { d.watcher.Run(ctx) })
	wg.Wait()
	// The remote clusters run under ctx too: they are stopping already.
	return errlist.Join(localErr, d.clusters.stopAll())
}

// listen returns the monitoring listener: Config.MonitoringListener, or a new
// one on Config.MonitoringAddress.
func (d *Daemon) listen() (net.Listener, error) {
	if d.cfg.MonitoringListener != nil {
		return d.cfg.MonitoringListener, nil
	}
	ln, err := net.Listen("tcp", d.cfg.MonitoringAddress)
	if err != nil {
		return nil, fmt.Errorf("daemon: monitoring: %w", err)
	}
	return ln, nil
}

// awaitStopped waits up to ShutdownTimeout for the group to stop, and says
// what is still running when it does not.
func (d *Daemon) awaitStopped(stopped <-chan error) error {
	timer := time.NewTimer(d.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case err := <-stopped:
		d.log.Info("all elections stopped")
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		return nil
	case <-timer.C:
		err := fmt.Errorf("daemon: %w after %v; still running: %s", ErrShutdownTimeout, d.cfg.ShutdownTimeout, d.stillRunning())
		d.log.Error("shutdown did not finish in time", zap.Error(err))
		return err
	}
}

// Run builds a Daemon from cfg and runs it until ctx is cancelled.
func Run(ctx context.Context, cfg Config) error {
	d, err := New(cfg)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// Elections returns every election as /debug/elections shows it, with this
// process's identity and what stops the work each one gates, in Config.Kinds
// order.
func (d *Daemon) Elections() []monitoring.Election {
	out := make([]monitoring.Election, 0, len(d.elections))
	for i, le := range d.elections {
		e := monitoring.Election{Status: le.Status(), Identity: le.Identity(), Cluster: d.cfg.ClusterID}
		for _, rep := range d.reporters[i] {
			if err := rep.Problem(); err != nil {
				e.Problems = append(e.Problems, err.Error())
			}
		}
		out = append(out, e)
	}
	if d.clusters != nil {
		out = append(out, d.clusters.elections()...)
	}
	return out
}

// Clusters returns this instance's own cluster and, with Multicluster,
// every remote cluster it runs and every Secret key it skipped.
func (d *Daemon) Clusters() []monitoring.Cluster {
	out := []monitoring.Cluster{{ID: d.cfg.ClusterID, State: ClusterLocal}}
	if d.clusters != nil {
		out = append(out, d.clusters.clusters()...)
	}
	return out
}

// Healthy returns an error naming every election this process leads without
// having renewed it for longer than TTL + HealthTolerance. Followers and
// disabled elections are always healthy.
func (d *Daemon) Healthy() error {
	var errs []error
	for _, le := range d.elections {
		if err := le.Check(d.cfg.HealthTolerance); err != nil {
			errs = append(errs, fmt.Errorf("election %s: %w", le.Status().ID, err))
		}
	}
	if d.clusters != nil {
		errs = append(errs, d.clusters.healthy(d.cfg.HealthTolerance)...)
	}
	return errlist.Join(errs...)
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
	if !d.group.Synced() {
		return errors.New("the default revision watcher has not synced")
	}
	if d.watcher != nil && !d.watcher.HasSynced() {
		return fmt.Errorf("the remote cluster Secrets (label %s=true) have not been read; meshd needs get, list and watch on Secrets in namespace %s",
			multicluster.SecretLabel, d.cfg.Namespace)
	}
	var errs []error
	for _, reporters := range d.reporters {
		for _, rep := range reporters {
			errs = append(errs, rep.Problem())
		}
	}
	return errlist.Join(errs...)
}

// Registry is the daemon's metrics registry, served on /metrics.
func (d *Daemon) Registry() *prometheus.Registry { return d.registry }

func (d *Daemon) electionIDs() []string {
	ids := make([]string, len(d.elections))
	for i, le := range d.elections {
		ids[i] = le.Status().Name
	}
	return ids
}

func (d *Daemon) stillRunning() string {
	names := d.group.Running()
	if d.clusters != nil {
		for _, r := range d.clusters.list() {
			select {
			case <-r.done:
			default:
				names = append(names, "cluster "+r.cluster.ID)
			}
		}
	}
	if len(names) > 0 {
		return strings.Join(names, ", ")
	}
	return "the default revision watcher or the event recorder"
}
