package bench

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// Impl names an implementation of leader election under test.
type Impl string

// The implementations compared side by side, all on Lease locks.
const (
	// Meshd is meshd with its defaults: watch-driven, cooperative handover,
	// one record renewed per election (per-record mode).
	Meshd Impl = "meshd"
	// MeshdSession is Meshd in session mode: one heartbeat Lease per process
	// is renewed for all of the process's elections, whose records are only
	// written when a term begins or ends.
	MeshdSession Impl = "meshd-session"
	// MeshdPolling is meshd as istiod behaves: no watch, no handover.
	MeshdPolling Impl = "meshd-polling"
	// ClientGo is k8s.io/client-go/tools/leaderelection with a LeaseLock.
	ClientGo Impl = "client-go"
)

// Impls is the order of implementations in every table.
var Impls = []Impl{Meshd, MeshdSession, MeshdPolling, ClientGo}

// ScaleOnly are the implementations the benchmark runs in its scale section
// only; the latency and request sections compare the shipped defaults.
var ScaleOnly = []Impl{MeshdSession}

// ParseImpl checks an implementation name.
func ParseImpl(s string) (Impl, error) {
	for _, i := range Impls {
		if string(i) == s {
			return i, nil
		}
	}
	return "", fmt.Errorf("unknown implementation %q (want one of %v)", s, Impls)
}

// Spec describes one candidate of one election.
type Spec struct {
	Impl      Impl
	Client    kubernetes.Interface
	Namespace string
	// Lock is the name of the Lease.
	Lock     string
	Identity string
	// TTL gives LeaseDuration=ttl, RenewDeadline=ttl/2, RetryPeriod=ttl/4
	// for every implementation.
	TTL time.Duration
	// ReleaseOnCancel: clear the lock when Run's context ends while leading.
	// Without it, cancelling Run is a crash as far as the lock is concerned.
	ReleaseOnCancel bool

	// Revision and Watcher make a meshd candidate prioritized: the default
	// revision (from Watcher) takes the lock from other revisions. Empty
	// Revision means a plain election. client-go has no priorities.
	Revision string
	Watcher  revisions.DefaultWatcher
	// Shared is what a meshd candidate shares with the other elections of
	// its process (watches, sessions, pacing); nil gives it its own, as a
	// process running this one election has.
	Shared *election.Shared
	// Pod, for meshd, is the Pod the candidate's process runs in: it
	// publishes it while it leads (WithPodIdentity) and follows holders'
	// Pods (WithPodFailover).
	Pod *election.PodIdentity

	// Work runs while the candidate leads, until its context ends.
	Work func(ctx context.Context)
	// Logger receives meshd's elector logs; nil discards them.
	Logger *zap.Logger
}

// Candidate is one running contender. Run contends until ctx ends,
// re-contending after every lost term, and returns once its work and
// goroutines have stopped.
type Candidate interface {
	Run(ctx context.Context)
	// Leader is the holder identity this candidate last observed ("" when
	// unknown or released).
	Leader() string
	// Leading reports whether this candidate is in a term.
	Leading() bool
}

// NewCandidate builds a candidate of spec.Impl.
func NewCandidate(s Spec) (Candidate, error) {
	if s.Work == nil {
		s.Work = func(ctx context.Context) { <-ctx.Done() }
	}
	switch s.Impl {
	case Meshd, MeshdSession, MeshdPolling:
		return newMeshd(s)
	case ClientGo:
		if s.Revision != "" {
			return nil, fmt.Errorf("%s has no priorities", ClientGo)
		}
		return newClientGo(s)
	}
	return nil, fmt.Errorf("unknown implementation %q", s.Impl)
}
