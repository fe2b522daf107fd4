package bench

import (
	"context"
	"fmt"
	"strings"
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
	// renew) to the next start: what a lease-based failover waits for. A
	// trial whose old leader had a write in flight when it was cancelled
	// has none (the API server may have applied it, at a time the leader
	// never learnt): UnknownRenew counts those.
	SinceRenew   Durations
	UnknownRenew int
	// Named are the latencies of the trials in which the successor started
	// without a write of its own: the old holder's last write named it.
	// Relayed are the others: a release, then the successor's write.
	Named   Durations
	Relayed Durations
	Overlap Overlap
	Errors  []string
}

// RunTakeover measures how fast a plain election of three candidates gets a
// new leader after its leader is cancelled: with release (graceful
// handover, release true) or without (a crash, release false).
func RunTakeover(ctx context.Context, env *Env, cfg Config, impl Impl, release bool) TakeoverResult {
	return runTakeover(ctx, env, cfg, impl, release, nil)
}

// RunHandoverWithFloor is RunTakeover of graceful handovers that also
// measures the API server's floor: floorSamples samples during the steady
// pause of every trial, so that both see the same load.
func RunHandoverWithFloor(ctx context.Context, env *Env, cfg Config, impl Impl) (TakeoverResult, FloorResult) {
	probe, err := newFloorProbe(ctx, env)
	if err != nil {
		return TakeoverResult{Impl: impl, Errors: []string{err.Error()}}, FloorResult{Errors: []string{err.Error()}}
	}
	defer probe.stop()
	res := runTakeover(ctx, env, cfg, impl, true, probe)
	f := probe.res
	cfg.logf("  floor: update %s, watched update %s, update relayed through a watch %s (medians of %d)",
		fmtMS(medianOf(f.Update)), fmtMS(medianOf(f.Watched)), fmtMS(medianOf(f.Relay)), len(f.Relay))
	return res, f
}

func runTakeover(ctx context.Context, env *Env, cfg Config, impl Impl, release bool, probe *floorProbe) TakeoverResult {
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
	var legs []Legs // of traced trials
	for i := 0; i < cfg.Trials && ctx.Err() == nil; i++ {
		lock := fmt.Sprintf("%s-%d", impl, i)
		lat, sinceRenew, named, known, err := takeoverTrial(ctx, env, cfg, tr, probe, &legs, Spec{
			Impl: impl, Namespace: ns, Lock: lock, TTL: cfg.TTL, ReleaseOnCancel: release,
		})
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("trial %d: %v", i, err))
			cfg.logf("  %s %s trial %d: %v", kind, impl, i, err)
			continue
		}
		res.Latency = append(res.Latency, lat)
		if known {
			res.SinceRenew = append(res.SinceRenew, sinceRenew)
		} else {
			res.UnknownRenew++
		}
		how := ""
		if named {
			res.Named = append(res.Named, lat)
			how = " (successor named by the old holder)"
		} else {
			res.Relayed = append(res.Relayed, lat)
		}
		cfg.logf("  %s %s trial %d: %s%s", kind, impl, i, fmtDur(lat), how)
	}
	res.Overlap = tr.Overlap()
	if cfg.Trace != nil {
		writeLegs(cfg.Trace, fmt.Sprintf("%s %s at ttl %v", kind, impl, cfg.TTL), legs)
	}
	return res
}

// takeoverTrial runs one trial; named reports whether the successor
// started without a write of its own after the old leader was cancelled,
// known whether sinceRenew is known (no write of the old leader was in
// flight when it was cancelled).
func takeoverTrial(ctx context.Context, env *Env, cfg Config, tr *Tracker, probe *floorProbe, legs *[]Legs, base Spec) (lat, sinceRenew time.Duration, named, known bool, err error) {
	var g group
	defer func() {
		if e := g.stopAll(cfg.stopTimeout()); e != nil && err == nil {
			err = e
		}
	}()
	var tl *Timeline
	if cfg.Trace != nil && base.Impl == Meshd && base.ReleaseOnCancel {
		tl = &Timeline{}
	}
	for c := 0; c < 3; c++ {
		spec := base
		spec.Identity = fmt.Sprintf("%s-c%d", base.Lock, c)
		spec.Work = tr.Work(base.Lock, spec.Identity)
		if tl != nil {
			work, who := spec.Work, fmt.Sprintf("c%d", c)
			spec.Work = func(ctx context.Context) {
				tl.Add(who, stepRunStarted)
				defer tl.Add(who, stepRunReturned)
				work(ctx)
			}
		}
		m, err := startTracedMember(env.Config, spec, tl, fmt.Sprintf("c%d", c))
		if err != nil {
			return 0, 0, false, false, err
		}
		g = append(g, m)
	}
	if err := waitUntil(ctx, cfg.settleTimeout(), "a leader seen by all", g.settled); err != nil {
		return 0, 0, false, false, err
	}
	// Let followers reach their steady state, and act at a random phase;
	// the floor is sampled meanwhile.
	pause := sleep
	if probe != nil {
		pause = probe.sampleDuring
	}
	if err := pause(ctx, cfg.steadyPause()); err != nil {
		return 0, 0, false, false, err
	}
	old := g.leader()
	if old == nil {
		return 0, 0, false, false, fmt.Errorf("leadership changed while settling")
	}
	t0 := time.Now()
	var nextWho string // the successor's name in the timeline, once known
	if tl != nil {
		oldWho := strings.TrimPrefix(old.id, base.Lock+"-")
		tl.AddAt(t0, oldWho, "cancelled (the handover begins)")
		defer func() {
			fmt.Fprintf(cfg.Trace, "%s: handover in %s\n", base.Lock, fmtDur(lat))
			tl.Write(cfg.Trace, t0)
			if l, ok := tl.HandoverLegs(t0, oldWho, nextWho); ok && err == nil {
				*legs = append(*legs, l)
			}
		}()
	}
	old.cancel()
	next, err := tr.WaitFor(cfg.takeoverTimeout(), "a new leader", func(iv ledger.Interval) bool {
		return iv.Election == base.Lock && iv.Holder != old.id && iv.Start.After(t0)
	})
	if err != nil {
		return 0, 0, false, false, err
	}
	nextWho = strings.TrimPrefix(next.Holder, base.Lock+"-")
	if err := old.stop(cfg.stopTimeout()); err != nil {
		return 0, 0, false, false, err
	}
	named = true
	for _, m := range g {
		if m.id == next.Holder {
			wrote, ok := m.counter.FirstUpdateAfter(t0)
			named = !ok || wrote.After(next.Start)
		}
	}
	return next.Start.Sub(t0), next.Start.Sub(old.counter.LastWrite()), named, !old.counter.WriteUnknownSince(), nil
}
