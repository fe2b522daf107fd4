package bench

import (
	"context"

	"github.com/meshd-io/meshd/internal/election/testknobs"
	"github.com/meshd-io/meshd/pkg/election"
)

type meshdCandidate struct {
	le *election.LeaderElection
}

// newMeshd builds a meshd candidate. Meshd uses the shipped defaults (watch,
// cooperative handover with the default grace); MeshdPolling turns both off
// and starts its work at once after a forced steal, which is how istiod's
// elector behaves; MeshdSession is Meshd in session mode. Without a revision
// the election does not steal, and the options of stealing do not apply.
func newMeshd(s Spec) (*meshdCandidate, error) {
	prioritized := s.Revision != ""
	opts := []election.Option{
		election.WithEnabled(true),
		election.WithTTL(s.TTL),
		election.WithReleaseOnCancel(s.ReleaseOnCancel),
		election.WithStopTimeout(election.DefaultStopTimeout),
		election.WithWatch(s.Impl != MeshdPolling),
		election.WithPrioritized(prioritized),
	}
	switch {
	case prioritized && s.Impl == MeshdPolling:
		opts = append(opts, election.WithHandover(false, 0), testknobs.StartAtOnceAfterSteal(true))
	case prioritized:
		opts = append(opts, election.WithHandover(true, election.DefaultHandoverGrace))
	}
	if s.Impl == MeshdSession {
		o, err := sessionOption()
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	}
	if s.Pod != nil {
		opts = append(opts, election.WithPodIdentity(*s.Pod), election.WithPodFailover(true))
	}
	if s.Logger != nil {
		opts = append(opts, election.WithLogger(s.Logger))
	}
	if s.Watcher != nil {
		opts = append(opts, election.WithDefaultWatcher(s.Watcher))
	}
	if s.Shared != nil {
		opts = append(opts, election.WithShared(s.Shared))
	}
	rev := s.Revision
	if rev == "" {
		rev = election.DefaultRevision
	}
	le, err := election.NewLeaseLeaderElection(s.Namespace, s.Identity, s.Lock, rev, s.Client, opts...)
	if err != nil {
		return nil, err
	}
	le.Add(func(ctx context.Context) error { s.Work(ctx); return nil })
	return &meshdCandidate{le: le}, nil
}

func (c *meshdCandidate) Run(ctx context.Context) { _ = c.le.RunContext(ctx) }
func (c *meshdCandidate) Leader() string          { return c.le.Status().Holder }
func (c *meshdCandidate) Leading() bool           { return c.le.IsLeader() }
