package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/controllers"
	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/internal/monitoring"
	"github.com/meshd-io/meshd/internal/multicluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/features"
)

// ReasonInvalidRemoteCluster is the reason of the Warning Event recorded on
// a remote cluster Secret whose key the daemon skips.
const ReasonInvalidRemoteCluster = "InvalidRemoteCluster"

// Cluster states, as /debug/clusters shows them.
const (
	ClusterLocal     = "local"      // this instance's own cluster
	ClusterJoining   = "joining"    // deciding whether to join (external control plane)
	ClusterRunning   = "running"    // contending in the remote cluster's election
	ClusterNotJoined = "not-joined" // the remote cluster names other control planes
	ClusterInvalid   = "invalid"    // skipped: the Secret key is not usable
	ClusterFailed    = "failed"     // its election group stopped with an error
)

// RemoteClientsFunc connects to a remote cluster: a client for its
// controllers and one for its election, as Config.Client and
// Config.ElectionClient. An error says why the cluster cannot be used.
type RemoteClientsFunc func(c multicluster.Cluster) (client, electionClient kubernetes.Interface, err error)

// DefaultRemoteClients reads the cluster's kubeconfig with
// multicluster.RESTConfig and builds two clients with their own rate
// limiters, as meshd does for its own cluster.
func DefaultRemoteClients(c multicluster.Cluster) (kubernetes.Interface, kubernetes.Interface, error) {
	cfg, err := multicluster.RESTConfig(c.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = 50, 100
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	electionClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return client, electionClient, nil
}

// clusterSet runs the remote clusters: for each, the namespace election of
// that cluster with a remote key and its controllers, publishing the local
// cluster's root. Its methods are safe for concurrent use; update is
// called by the Secret watcher only.
type clusterSet struct {
	d *Daemon

	mu       sync.Mutex
	ctx      context.Context // the daemon's work; nil until Run
	running  map[string]*remoteCluster
	problems []error // the Secret keys skipped, from the last update
	stopped  bool
}

// remoteCluster is one remote cluster and what runs for it.
type remoteCluster struct {
	cluster   multicluster.Cluster
	election  *election.LeaderElection
	reporters []controllers.Reporter
	metrics   *trackingRegisterer
	// start runs the cluster's election until ctx ends.
	start  func(ctx context.Context) error
	cancel context.CancelFunc
	done   chan struct{} // closed when everything of the cluster stopped

	mu     sync.Mutex
	state  string
	reason string
	err    error // what the election group returned
}

func (r *remoteCluster) setState(state, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state, r.reason = state, reason
}

func (r *remoteCluster) getState() (state, reason string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state, r.reason, r.err
}

func newClusterSet(d *Daemon) *clusterSet {
	return &clusterSet{d: d, running: map[string]*remoteCluster{}}
}

// start makes the set run clusters under ctx, the daemon's work.
func (s *clusterSet) start(ctx context.Context) {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
}

// Update is the watcher's handler: it stops the clusters that are gone,
// restarts those whose kubeconfig changed and starts the new ones. A
// changed kubeconfig that cannot be used leaves the cluster running on the
// old one.
func (s *clusterSet) Update(clusters []multicluster.Cluster, problems []error) {
	log := s.d.log
	s.mu.Lock()
	ctx, stopped := s.ctx, s.stopped
	current := make(map[string]*remoteCluster, len(s.running))
	for id, r := range s.running {
		current[id] = r
	}
	s.mu.Unlock()
	if stopped || ctx == nil || ctx.Err() != nil {
		return
	}

	want := map[string]multicluster.Cluster{}
	for _, c := range clusters {
		want[c.ID] = c
	}
	for id, r := range current {
		if _, ok := want[id]; !ok {
			log.Info("remote cluster removed: stopping its controllers and releasing its lock", zap.String("cluster", id), zap.String("secret", r.cluster.Secret))
			s.stop(r)
		}
	}
	for _, c := range clusters {
		old := current[c.ID]
		if old != nil && old.cluster.Hash() == c.Hash() {
			continue
		}
		client, electionClient, err := s.d.cfg.RemoteClients(c)
		if err != nil {
			err = &multicluster.ClusterError{ID: c.ID, Secret: c.Secret, Err: err}
			if old != nil {
				err = fmt.Errorf("%w; still running with the previous kubeconfig", err)
			}
			problems = append(problems, err)
			continue
		}
		if old != nil {
			log.Info("remote cluster changed: restarting it", zap.String("cluster", c.ID), zap.String("secret", c.Secret))
			s.stop(old)
		}
		r, err := s.build(c, client, electionClient)
		if err != nil {
			problems = append(problems, &multicluster.ClusterError{ID: c.ID, Secret: c.Secret, Err: err})
			continue
		}
		s.run(ctx, r)
	}
	s.setProblems(problems)
}

// setProblems logs and records the problems that are new since the last
// update.
func (s *clusterSet) setProblems(problems []error) {
	s.mu.Lock()
	old := map[string]bool{}
	for _, p := range s.problems {
		old[p.Error()] = true
	}
	s.problems = problems
	s.mu.Unlock()
	for _, p := range problems {
		if old[p.Error()] {
			continue
		}
		s.d.log.Error("skipping a remote cluster", zap.Error(p))
		var ce *multicluster.ClusterError
		if errors.As(p, &ce) {
			ns, name := splitName(ce.Secret)
			ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: name}
			s.d.group.EventRecorder().Eventf(ref, corev1.EventTypeWarning, ReasonInvalidRemoteCluster, "%s", p.Error())
		}
	}
}

func splitName(s string) (namespace, name string) {
	if ns, name, ok := strings.Cut(s, "/"); ok {
		return ns, name
	}
	return "", s
}

// build prepares the cluster's election and controllers on its clients.
// It starts nothing.
func (s *clusterSet) build(c multicluster.Cluster, client, electionClient kubernetes.Interface) (*remoteCluster, error) {
	d := s.d
	log := d.log.With(zap.String("cluster", c.ID))
	reg := &trackingRegisterer{next: prometheus.WrapRegistererWith(prometheus.Labels{"cluster": c.ID}, d.revisionReg)}
	r := &remoteCluster{cluster: c, metrics: reg, done: make(chan struct{}), state: ClusterJoining}
	ok := false
	defer func() {
		if !ok {
			reg.unregisterAll()
		}
	}()
	opts := append(features.ElectionOptions(),
		election.WithTTL(d.cfg.TTL),
		election.WithLogger(log),
		election.WithPrometheus(reg),
		election.WithEvents(client),
		election.WithReleaseOnCancel(true),
		election.WithStopTimeout(min(features.LeaderElectionStopTimeout.Get(), d.cfg.ShutdownTimeout/2)),
		// This process's Pod is not in that cluster: no Pod-aware failover
		// for its locks there.
		election.WithPodIdentity(election.PodIdentity{}),
		election.WithPodFailover(false),
	)
	group, err := election.NewGroup(electionClient, opts...)
	if err != nil {
		return nil, err
	}
	le, err := group.New(election.Spec{
		Namespace:  d.cfg.Namespace,
		Identity:   d.cfg.Identity,
		Revision:   d.cfg.Revision,
		ElectionID: election.NamespaceController,
		Remote:     true,
	})
	if err != nil {
		return nil, err
	}
	ctls, err := d.cfg.Controllers(KindNamespace, ControllerEnv{
		Client:             client,
		SourceClient:       d.cfg.Client,
		Cluster:            c.ID,
		Namespace:          d.cfg.Namespace,
		Identity:           d.cfg.Identity,
		Revision:           d.cfg.Revision,
		Remote:             true,
		SelfSignedRoot:     d.cfg.SelfSignedRoot,
		ClusterTrustBundle: d.cfg.ClusterTrustBundle,
		Recorder:           group.EventRecorder(),
		Logger:             log.Named(string(KindNamespace)),
		Registerer:         reg,
	})
	if err != nil {
		return nil, fmt.Errorf("building controllers: %w", err)
	}
	for _, ctl := range ctls {
		if rep, isRep := ctl.(controllers.Reporter); isRep {
			r.reporters = append(r.reporters, rep)
		}
		runCtl := ctl.Run
		if d.ledger != nil {
			runCtl = d.ledger.Wrap(d.ledgerName(c.ID, le.Status().Name), d.cfg.Identity, runCtl)
		}
		le.Add(controllers.RunFunc(ctl, runCtl))
	}
	r.election = le
	runGroup := group.Run
	ok = true
	r.start = func(ctx context.Context) error {
		if d.cfg.ExternalControlPlane {
			join, reason, err := multicluster.ShouldJoin(ctx, client, d.cfg.Namespace, d.cfg.ClusterID)
			if err != nil {
				return nil // stopped while deciding
			}
			log.Info("external control plane: deciding whether to join the remote cluster's election", zap.Bool("join", join), zap.String("why", reason))
			if !join {
				r.setState(ClusterNotJoined, reason)
				<-ctx.Done()
				return nil
			}
		}
		r.setState(ClusterRunning, "")
		return runGroup(ctx)
	}
	return r, nil
}

// run starts r under ctx and adds it to the set.
func (s *clusterSet) run(ctx context.Context, r *remoteCluster) {
	ctx, r.cancel = context.WithCancel(ctx)
	s.mu.Lock()
	s.running[r.cluster.ID] = r
	s.mu.Unlock()
	s.d.log.Info("remote cluster added: joining its namespace election with a remote key",
		zap.String("cluster", r.cluster.ID), zap.String("secret", r.cluster.Secret), zap.String("lock", r.election.Status().Name))
	go func() {
		defer close(r.done)
		err := r.start(ctx)
		r.mu.Lock()
		r.err = err
		if err != nil {
			r.state, r.reason = ClusterFailed, err.Error()
		}
		r.mu.Unlock()
		if err != nil {
			s.d.log.Error("remote cluster's election failed", zap.String("cluster", r.cluster.ID), zap.Error(err))
		}
	}()
}

// stop stops r's controllers, releases its lock and removes it from the
// set, waiting up to the shutdown timeout.
func (s *clusterSet) stop(r *remoteCluster) {
	r.cancel()
	s.mu.Lock()
	if s.running[r.cluster.ID] == r {
		delete(s.running, r.cluster.ID)
	}
	s.mu.Unlock()
	if err := s.await(r); err != nil {
		s.d.log.Error("remote cluster did not stop in time", zap.String("cluster", r.cluster.ID), zap.Error(err))
	}
	r.metrics.unregisterAll()
}

// await waits up to the shutdown timeout for r to stop.
func (s *clusterSet) await(r *remoteCluster) error {
	timer := time.NewTimer(s.d.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-r.done:
		_, _, err := r.getState()
		return err
	case <-timer.C:
		return fmt.Errorf("%w after %v: cluster %s", ErrShutdownTimeout, s.d.cfg.ShutdownTimeout, r.cluster.ID)
	}
}

// stopAll stops every cluster at once and refuses later updates. The
// daemon's context has already been cancelled, so each is stopping.
func (s *clusterSet) stopAll() error {
	s.mu.Lock()
	s.stopped = true
	rs := make([]*remoteCluster, 0, len(s.running))
	for _, r := range s.running {
		rs = append(rs, r)
	}
	s.mu.Unlock()
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		r.cancel()
		wg.Go(func() { errs[i] = s.await(r) })
	}
	wg.Wait()
	return errlist.Join(errs...)
}

// list returns the running clusters sorted by ID.
func (s *clusterSet) list() []*remoteCluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := make([]*remoteCluster, 0, len(s.running))
	for _, r := range s.running {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *remoteCluster) int {
		switch {
		case a.cluster.ID < b.cluster.ID:
			return -1
		case a.cluster.ID > b.cluster.ID:
			return 1
		}
		return 0
	})
	return rs
}

// elections returns the election of every remote cluster that takes part
// in it (not those still deciding, or not joined).
func (s *clusterSet) elections() []monitoring.Election {
	var out []monitoring.Election
	for _, r := range s.list() {
		if state, _, _ := r.getState(); state != ClusterRunning {
			continue
		}
		e := monitoring.Election{Status: r.election.Status(), Identity: r.election.Identity(), Cluster: r.cluster.ID}
		for _, rep := range r.reporters {
			if err := rep.Problem(); err != nil {
				e.Problems = append(e.Problems, err.Error())
			}
		}
		out = append(out, e)
	}
	return out
}

// healthy checks the election of every remote cluster as Daemon.Healthy
// checks the local ones.
func (s *clusterSet) healthy(tolerance time.Duration) []error {
	var errs []error
	for _, r := range s.list() {
		if err := r.election.Check(tolerance); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: election %s: %w", r.cluster.ID, r.election.Status().ID, err))
		}
	}
	return errs
}

// clusters describes the remote clusters: running ones, and the Secret
// keys that were skipped.
func (s *clusterSet) clusters() []monitoring.Cluster {
	var out []monitoring.Cluster
	for _, r := range s.list() {
		state, reason, err := r.getState()
		c := monitoring.Cluster{ID: r.cluster.ID, Secret: r.cluster.Secret, State: state, Reason: reason}
		if err != nil {
			c.Problems = append(c.Problems, err.Error())
		}
		out = append(out, c)
	}
	s.mu.Lock()
	problems := slices.Clone(s.problems)
	s.mu.Unlock()
	for _, p := range problems {
		c := monitoring.Cluster{State: ClusterInvalid, Problems: []string{p.Error()}}
		var ce *multicluster.ClusterError
		if errors.As(p, &ce) {
			c.ID, c.Secret = ce.ID, ce.Secret
		}
		out = append(out, c)
	}
	return out
}

// trackingRegisterer registers into next and remembers what it registered,
// so that a removed cluster's series go with it.
type trackingRegisterer struct {
	next prometheus.Registerer

	mu         sync.Mutex
	collectors []prometheus.Collector
}

func (t *trackingRegisterer) Register(c prometheus.Collector) error {
	if err := t.next.Register(c); err != nil {
		return err
	}
	t.mu.Lock()
	t.collectors = append(t.collectors, c)
	t.mu.Unlock()
	return nil
}

func (t *trackingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

func (t *trackingRegisterer) Unregister(c prometheus.Collector) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.collectors = slices.DeleteFunc(t.collectors, func(x prometheus.Collector) bool { return x == c })
	return t.next.Unregister(c)
}

func (t *trackingRegisterer) unregisterAll() {
	t.mu.Lock()
	cs := t.collectors
	t.collectors = nil
	t.mu.Unlock()
	for _, c := range cs {
		t.next.Unregister(c)
	}
}
