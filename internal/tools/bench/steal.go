package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/ledger"
)

// StealResult is how fast a change of the default revision moves the lock,
// for one implementation.
type StealResult struct {
	Impl Impl
	// Start is from the change to the new leader's run function start.
	Start Durations
	// Stop is from the change to the old leader's run function stop.
	Stop Durations
	// Done is the later of the two: the handover is complete.
	Done Durations
	// Relay is from the old leader's stop to the new leader's start: the
	// old holder's write naming its successor, seen through the
	// successor's watch.
	Relay   Durations
	Overlap Overlap
	Errors  []string
}

// Steal revisions: one follower of the default revision, one leader of
// another. Every trial makes the follower's revision the default.
const (
	revA = "canary"
	revB = "stable"
)

// RunSteal measures prioritized elections of two candidates of different
// revisions, on one Lease, sharing one default-revision watcher. Each trial
// flips the default to the follower's revision, so the lock moves back and
// forth. client-go has no priorities and cannot take part.
func RunSteal(ctx context.Context, env *Env, cfg Config, impl Impl) StealResult {
	res := StealResult{Impl: impl}
	if err := runSteal(ctx, env, cfg, impl, &res); err != nil {
		res.Errors = append(res.Errors, err.Error())
		cfg.logf("  steal %s: %v", impl, err)
	}
	return res
}

func runSteal(ctx context.Context, env *Env, cfg Config, impl Impl, res *StealResult) (err error) {
	ns, err := env.NewNamespace(ctx, "steal")
	if err != nil {
		return err
	}
	tr := NewTracker()
	defer func() { res.Overlap = tr.Overlap() }()
	watcher := &defaultwatch.Static{}
	watcher.SetDefault(revA)
	lock := string(impl)
	var g group
	defer func() {
		if e := g.stopAll(cfg.stopTimeout()); e != nil && err == nil {
			err = e
		}
	}()
	start := func(rev string) (*member, error) {
		id := fmt.Sprintf("%s-%s", impl, rev)
		m, err := startMember(env.Config, Spec{
			Impl: impl, Namespace: ns, Lock: lock, Identity: id, TTL: cfg.TTL, ReleaseOnCancel: true,
			Revision: rev, Watcher: watcher, Work: tr.Work(lock, id),
		})
		if err == nil {
			g = append(g, m)
		}
		return m, err
	}
	// The default's candidate first, so that it certainly leads.
	a, err := start(revA)
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, cfg.settleTimeout(), revA+" to lead", a.cand.Leading); err != nil {
		return err
	}
	if _, err := start(revB); err != nil {
		return err
	}
	revOf := map[*member]string{g[0]: revA, g[1]: revB}
	for i := 0; i < cfg.Trials && ctx.Err() == nil; i++ {
		if err := waitUntil(ctx, cfg.settleTimeout(), "a leader seen by both", g.settled); err != nil {
			return err
		}
		if err := sleep(ctx, cfg.steadyPause()); err != nil {
			return err
		}
		old := g.leader()
		if old == nil {
			return fmt.Errorf("trial %d: leadership changed while settling", i)
		}
		next := g[0]
		if next == old {
			next = g[1]
		}
		t0 := time.Now()
		watcher.SetDefault(revOf[next])
		started, err := tr.WaitFor(cfg.takeoverTimeout(), revOf[next]+" to start", func(iv ledger.Interval) bool {
			return iv.Holder == next.id && iv.Start.After(t0)
		})
		if err != nil {
			return fmt.Errorf("trial %d: %w", i, err)
		}
		stopped, err := tr.WaitFor(cfg.takeoverTimeout(), revOf[old]+" to stop", func(iv ledger.Interval) bool {
			return iv.Holder == old.id && iv.Start.Before(t0) && iv.Stop.After(t0) // the term running at t0, ended
		})
		if err != nil {
			return fmt.Errorf("trial %d: %w", i, err)
		}
		s, p := started.Start.Sub(t0), stopped.Stop.Sub(t0)
		res.Start = append(res.Start, s)
		res.Stop = append(res.Stop, p)
		res.Done = append(res.Done, max(s, p))
		res.Relay = append(res.Relay, s-p)
		cfg.logf("  steal %s trial %d: new leader after %s, old stopped after %s", impl, i, fmtDur(s), fmtDur(p))
	}
	return nil
}
