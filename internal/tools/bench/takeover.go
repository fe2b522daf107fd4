package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/meshd-io/meshd/internal/ledger"
)

// TakeoverResult is the time from a leader's end to its successor's first
// run, over repeated trials, for one implementation.
type TakeoverResult struct {
	Impl Impl
	// Latency is from cancelling the leader to the next run function start.
	Latency Durations
	// SinceRenew is from the old leader's last successful write (acquire or
	// renew) to the next start: what a lease-based failover waits for.
	SinceRenew Durations
	Overlap    Overlap
	Errors     []string
}

// RunTakeover measures how fast a plain election of three candidates gets a
// new leader after its leader is cancelled: with release (graceful
// handover, release true) or without (a crash, release false).
func RunTakeover(ctx context.Context, env *Env, cfg Config, impl Impl, release bool) TakeoverResult {
	kind := "failover"
	if release {
		kind = "handover"
	}
	res := TakeoverResult{Impl: impl}
	ns, err := env.NewNamespace(ctx, kind)
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	tr := NewTracker()
	for i := 0; i < cfg.Trials && ctx.Err() == nil; i++ {
		lock := fmt.Sprintf("%s-%d", impl, i)
		lat, sinceRenew, err := takeoverTrial(ctx, env, cfg, tr, Spec{
			Impl: impl, Namespace: ns, Lock: lock, TTL: cfg.TTL, ReleaseOnCancel: release,
		})
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("trial %d: %v", i, err))
			cfg.logf("  %s %s trial %d: %v", kind, impl, i, err)
			continue
		}
		res.Latency = append(res.Latency, lat)
		res.SinceRenew = append(res.SinceRenew, sinceRenew)
		cfg.logf("  %s %s trial %d: %s", kind, impl, i, fmtDur(lat))
	}
	res.Overlap = tr.Overlap()
	return res
}

func takeoverTrial(ctx context.Context, env *Env, cfg Config, tr *Tracker, base Spec) (lat, sinceRenew time.Duration, err error) {
	var g group
	defer func() {
		if e := g.stopAll(cfg.stopTimeout()); e != nil && err == nil {
			err = e
		}
	}()
	for c := 0; c < 3; c++ {
		spec := base
		spec.Identity = fmt.Sprintf("%s-c%d", base.Lock, c)
		spec.Work = tr.Work(base.Lock, spec.Identity)
		m, err := startMember(env.Config, spec)
		if err != nil {
			return 0, 0, err
		}
		g = append(g, m)
	}
	if err := waitUntil(ctx, cfg.settleTimeout(), "a leader seen by all", g.settled); err != nil {
		return 0, 0, err
	}
	// Let followers reach their steady state, and act at a random phase.
	if err := sleep(ctx, cfg.steadyPause()); err != nil {
		return 0, 0, err
	}
	old := g.leader()
	if old == nil {
		return 0, 0, fmt.Errorf("leadership changed while settling")
	}
	t0 := time.Now()
	old.cancel()
	next, err := tr.WaitFor(cfg.takeoverTimeout(), "a new leader", func(iv ledger.Interval) bool {
		return iv.Election == base.Lock && iv.Holder != old.id && iv.Start.After(t0)
	})
	if err != nil {
		return 0, 0, err
	}
	if err := old.stop(cfg.stopTimeout()); err != nil {
		return 0, 0, err
	}
	return next.Start.Sub(t0), next.Start.Sub(old.counter.LastWrite()), nil
}
