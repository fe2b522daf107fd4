package bench

import (
	"context"
	"fmt"
	"time"
)

// RequestsResult is the steady-state API traffic of one election of three
// replicas, for one implementation.
type RequestsResult struct {
	Impl   Impl
	Window time.Duration
	// Leader and Followers are requests sent during the window.
	Leader    Counts
	Followers []Counts
	Errors    []string
}

// PerMinute scales a count over the window to one minute.
func (r RequestsResult) PerMinute(n int) float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(n) * float64(time.Minute) / float64(r.Window)
}

// RequestsReplicas is the number of candidates in the request scenario.
const RequestsReplicas = 3

// RunRequests counts the requests of each of three candidates of one plain
// election over window, once they have settled.
func RunRequests(ctx context.Context, env *Env, cfg Config, impl Impl, window time.Duration) (res RequestsResult) {
	res = RequestsResult{Impl: impl, Window: window}
	if err := runRequests(ctx, env, cfg, &res); err != nil {
		res.Errors = append(res.Errors, err.Error())
		cfg.logf("  requests %s: %v", impl, err)
	}
	return res
}

func runRequests(ctx context.Context, env *Env, cfg Config, res *RequestsResult) (err error) {
	ns, err := env.NewNamespace(ctx, "requests")
	if err != nil {
		return err
	}
	var g group
	defer func() {
		if e := g.stopAll(cfg.stopTimeout()); e != nil && err == nil {
			err = e
		}
	}()
	lock := string(res.Impl)
	for c := 0; c < RequestsReplicas; c++ {
		m, err := startMember(env.Config, Spec{
			Impl: res.Impl, Namespace: ns, Lock: lock, Identity: fmt.Sprintf("%s-c%d", lock, c),
			TTL: cfg.TTL, ReleaseOnCancel: true,
		})
		if err != nil {
			return err
		}
		g = append(g, m)
	}
	if err := waitUntil(ctx, cfg.settleTimeout(), "a leader seen by all", g.settled); err != nil {
		return err
	}
	// Start-up traffic (create, first list and watch) is not steady state.
	if err := sleep(ctx, cfg.TTL); err != nil {
		return err
	}
	leader := g.leader()
	if leader == nil {
		return fmt.Errorf("leadership changed while settling")
	}
	before := make([]Counts, len(g))
	for i, m := range g {
		before[i] = m.counter.Snapshot()
	}
	if err := sleep(ctx, res.Window); err != nil {
		return err
	}
	if g.leader() != leader {
		return fmt.Errorf("leadership changed during the window")
	}
	for i, m := range g {
		d := m.counter.Snapshot().Sub(before[i])
		if m == leader {
			res.Leader = d
		} else {
			res.Followers = append(res.Followers, d)
		}
	}
	return nil
}
