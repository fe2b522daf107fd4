package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/ledger"
)

// ForcedResult is how fast, and with how much overlap, a prioritized
// candidate takes the lock from a holder that does not cooperate, for one
// implementation of the candidate. The holder is client-go's elector: it
// writes no holder key (the default revision outranks it by the steal rule)
// and knows nothing of the handover protocol, so it learns of the steal only
// at its next renew and keeps its work running until its renew deadline.
type ForcedResult struct {
	Impl Impl
	// Write is from the default change to the return of the candidate's
	// write that took the lock.
	Write Durations
	// Start is from the change to the candidate's run function start.
	Start Durations
	// Stop is from the change to the holder's run function stop.
	Stop    Durations
	Overlap Overlap
	Errors  []string
}

// RunForced measures forced steals: in each trial, on a fresh Lease,
// client-go's elector leads and a candidate of impl of revision revA
// follows while revB is the default; the default then becomes revA and the
// candidate takes the lock by force.
func RunForced(ctx context.Context, env *Env, cfg Config, impl Impl) ForcedResult {
	res := ForcedResult{Impl: impl}
	ns, err := env.NewNamespace(ctx, "forced")
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	tr := NewTracker()
	for i := 0; i < cfg.Trials && ctx.Err() == nil; i++ {
		lock := fmt.Sprintf("%s-%d", impl, i)
		if err := forcedTrial(ctx, env, cfg, tr, impl, ns, lock, &res); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("trial %d: %v", i, err))
			cfg.logf("  forced steal %s trial %d: %v", impl, i, err)
		}
	}
	res.Overlap = tr.Overlap()
	return res
}

func forcedTrial(ctx context.Context, env *Env, cfg Config, tr *Tracker, impl Impl, ns, lock string, res *ForcedResult) (err error) {
	var g group
	defer func() {
		if e := g.stopAll(cfg.stopTimeout()); e != nil && err == nil {
			err = e
		}
	}()
	start := func(s Spec) (*member, error) {
		s.Namespace, s.Lock, s.TTL, s.Work = ns, lock, cfg.TTL, tr.Work(lock, s.Identity)
		m, err := startMember(env.Config, s)
		if err == nil {
			g = append(g, m)
		}
		return m, err
	}
	holder, err := start(Spec{Impl: ClientGo, Identity: lock + "-holder"})
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, cfg.settleTimeout(), "client-go's elector to lead", holder.cand.Leading); err != nil {
		return err
	}
	watcher := &defaultwatch.Static{}
	watcher.SetDefault(revB)
	stealer, err := start(Spec{Impl: impl, Identity: lock + "-" + revA, Revision: revA, Watcher: watcher})
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, cfg.settleTimeout(), "the holder seen by both", g.settled); err != nil {
		return err
	}
	if err := sleep(ctx, cfg.steadyPause()); err != nil {
		return err
	}
	if g.leader() != holder {
		return fmt.Errorf("leadership changed while settling")
	}
	t0 := time.Now()
	watcher.SetDefault(revA)
	started, err := tr.WaitFor(cfg.takeoverTimeout(), "the stealer to start", func(iv ledger.Interval) bool {
		return iv.Holder == stealer.id && iv.Start.After(t0)
	})
	if err != nil {
		return err
	}
	stopped, err := tr.WaitFor(cfg.takeoverTimeout(), "the holder to stop", func(iv ledger.Interval) bool {
		return iv.Holder == holder.id && iv.Stop.After(t0)
	})
	if err != nil {
		return err
	}
	wrote, ok := stealer.counter.FirstUpdateAfter(t0)
	if !ok {
		return fmt.Errorf("the stealer started without a successful write of the lock")
	}
	w, s, p := wrote.Sub(t0), started.Start.Sub(t0), stopped.Stop.Sub(t0)
	res.Write = append(res.Write, w)
	res.Start = append(res.Start, s)
	res.Stop = append(res.Stop, p)
	cfg.logf("  forced steal %s: lock taken after %s, work started after %s, holder stopped after %s", impl, fmtDur(w), fmtDur(s), fmtDur(p))
	return nil
}
