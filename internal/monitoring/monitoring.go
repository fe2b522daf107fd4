// Package monitoring serves meshd's HTTP endpoints:
//
//	/healthz          200 while every election this process leads is being
//	                  renewed; 503 naming each one that is not (liveness)
//	/readyz           200 once the daemon is running; 503 with the reason
//	                  before that and during shutdown (readiness)
//	/metrics          Prometheus metrics of the daemon's registry, with
//	                  meshd_build_info and series derived from the Source
//	                  (readiness, the holder of each election)
//	/debug/elections  JSON array of Election, one per election: its status
//	                  (with its mode and, when coordinated, its strategy and
//	                  the preferred holder last seen), this process's
//	                  identity and what stops its work
//	/debug/clusters   JSON array of Cluster: the local cluster and the
//	                  remote ones, when the Source is a ClusterSource
//
// The endpoints read the daemon through the small Source interface, so they
// can be tested without a cluster. Only GET (and HEAD) are served.
package monitoring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/meshd-io/meshd/pkg/election"
)

// DefaultAddress is where meshd serves its endpoints, the port istiod uses
// for monitoring.
const DefaultAddress = ":15014"

// shutdownGrace bounds how long Serve waits for requests in flight once its
// context ends.
const shutdownGrace = 2 * time.Second

// Source is what the endpoints report on. Implementations must be safe for
// concurrent use; every method is called once per request.
type Source interface {
	// Elections returns a snapshot of every election of the process.
	Elections() []Election
	// Healthy returns nil when the process is healthy, or an error saying
	// why not (for example an election it leads but no longer renews).
	Healthy() error
	// Ready returns nil once the process does its work, or why it does not
	// (yet).
	Ready() error
}

// Election is one election as /debug/elections shows it: the election's
// status (its fields at the top level of the JSON object), the identity this
// process contends with, and why the work the election gates is not being
// done, if something stops it (for example no mesh root certificate).
type Election struct {
	election.Status
	Identity string `json:"identity"`
	// Cluster is the ID of the cluster whose API server holds the lock;
	// empty when the process knows of one cluster only.
	Cluster  string   `json:"cluster,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// ClusterSource is a Source that knows several clusters; the endpoints
// then serve /debug/clusters.
type ClusterSource interface {
	Source
	// Clusters returns every cluster the process knows: its own first.
	Clusters() []Cluster
}

// Cluster is one cluster as /debug/clusters shows it.
type Cluster struct {
	// ID is the cluster ID (for a remote cluster, its Secret's data key).
	ID string `json:"id"`
	// Secret is the Secret a remote cluster was read from.
	Secret string `json:"secret,omitempty"`
	// State is "local", "joining", "running", "not-joined", "failed" or
	// "invalid".
	State string `json:"state"`
	// Reason explains the state, when it needs explaining.
	Reason   string   `json:"reason,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// Options configure a Server.
type Options struct {
	// Source is what the endpoints report on. Required.
	Source Source
	// Gatherer serves /metrics. Default: prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Logger receives errors of the metrics handler and of serving.
	// Default: no logging.
	Logger *zap.Logger
}

// Server is the monitoring HTTP handler. It is an http.Handler, so tests can
// mount it on httptest; Serve runs it on a listener.
type Server struct {
	mux *http.ServeMux
	log *zap.Logger
}

// New returns a Server reporting on opts.Source.
func New(opts Options) (*Server, error) {
	if opts.Source == nil {
		return nil, errors.New("monitoring: Options.Source is required")
	}
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.DefaultGatherer
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	s := &Server{mux: http.NewServeMux(), log: opts.Logger}
	src := opts.Source
	// Build information and state derived from the Source, beside the
	// program's own registry.
	state := prometheus.NewRegistry()
	if err := state.Register(newStateCollector(src)); err != nil {
		return nil, fmt.Errorf("monitoring: %w", err)
	}
	gatherer := prometheus.Gatherers{opts.Gatherer, state}
	// "GET /x" also matches HEAD; other methods get 405.
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeCheck(w, src.Healthy()) })
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { writeCheck(w, src.Ready()) })
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
		ErrorLog:      zapErrorLog{opts.Logger},
		ErrorHandling: promhttp.ContinueOnError,
	}))
	s.mux.HandleFunc("GET /debug/elections", func(w http.ResponseWriter, _ *http.Request) {
		statuses := src.Elections()
		if statuses == nil {
			statuses = []Election{} // "[]", never "null"
		}
		s.writeJSON(w, "/debug/elections", statuses)
	})
	if cs, ok := src.(ClusterSource); ok {
		s.mux.HandleFunc("GET /debug/clusters", func(w http.ResponseWriter, _ *http.Request) {
			clusters := cs.Clusters()
			if clusters == nil {
				clusters = []Cluster{}
			}
			s.writeJSON(w, "/debug/clusters", clusters)
		})
	}
	return s, nil
}

func (s *Server) writeJSON(w http.ResponseWriter, path string, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		s.log.Debug("writing "+path, zap.Error(err))
	}
}

// ServeHTTP serves the endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Serve serves the endpoints on ln until ctx ends, then stops accepting
// connections, waits briefly for requests in flight, and returns nil. It
// closes ln. Any other reason to stop serving is returned as an error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          zap.NewStdLog(s.log),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("monitoring: serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("monitoring: serving on %s: %w", ln.Addr(), err)
	}
	return nil
}

// writeCheck writes "ok" with 200, or the error's message with 503.
func writeCheck(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// zapErrorLog adapts zap to promhttp's error logger.
type zapErrorLog struct{ log *zap.Logger }

func (l zapErrorLog) Println(v ...any) { l.log.Error(fmt.Sprint(v...)) }
