package coordinated

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// outcome summarises a plan for comparison.
type outcome struct {
	pings              []string
	assign, prefer     string
	clear, setStrategy bool
	wake               time.Duration // after now; -1 when none
}

func summarise(p plan, now time.Time) outcome {
	o := outcome{clear: p.clear, setStrategy: p.setStrategy, wake: -1}
	for _, c := range p.ping {
		o.pings = append(o.pings, c.name())
	}
	if p.assign != nil {
		o.assign = p.assign.Name
	}
	if p.prefer != nil {
		o.prefer = p.prefer.Name
	}
	if !p.wake.IsZero() {
		o.wake = p.wake.Sub(now)
	}
	return o
}

func (c Candidate) name() string { return c.Name }

func TestDecide(t *testing.T) {
	now := t0
	stale := now.Add(-leaseDur - time.Second) // live, but older than its lease
	held := func(holder, key string) *coordinationv1.Lease { return heldLease(holder, key, now) }
	withPreferred := func(l *coordinationv1.Lease, name, key string) *coordinationv1.Lease {
		l.Spec.Strategy = ptr.To(Strategy)
		l.Spec.PreferredHolder = ptr.To(name)
		l.Annotations[PreferredHolderKeyAnnotation] = key
		return l
	}
	withStrategy := func(l *coordinationv1.Lease) *coordinationv1.Lease {
		l.Spec.Strategy = ptr.To(Strategy)
		return l
	}
	sl := cand{name: "stable-local", key: "stable", preempts: true, renew: now}
	sr := cand{name: "stable-remote", key: "^stable", preempts: true, renew: now}
	cn := cand{name: "canary", key: "canary", preempts: true, renew: now}
	staleSL := sl
	staleSL.renew = stale
	pingedSL := staleSL
	pingedSL.ping = now.Add(-time.Second) // unanswered, within AckTimeout
	silentSL := staleSL
	silentSL.ping = now.Add(-3 * time.Second) // unanswered past AckTimeout
	perRev := func(c cand) cand { c.preempts = false; return c }
	foreign := cn
	foreign.strategy = coordinationv1.OldestEmulationVersion

	for _, tc := range []struct {
		name   string
		lease  *coordinationv1.Lease
		vacant bool
		def    string
		cands  []cand
		want   outcome
	}{
		{"assign the best on a missing lease", nil, true, "stable",
			[]cand{cn, sr, sl}, outcome{assign: "stable-local", wake: -1}},
		{"assign follows the default", nil, true, "canary",
			[]cand{cn, sr, sl}, outcome{assign: "canary", wake: -1}},
		{"ping a stale best and wait", nil, true, "stable",
			[]cand{cn, staleSL}, outcome{pings: []string{"stable-local"}, wake: 2 * time.Second}},
		{"wait for an unanswered ping", nil, true, "stable",
			[]cand{cn, pingedSL}, outcome{wake: time.Second}},
		{"skip a candidate that did not ack", nil, true, "stable",
			[]cand{cn, silentSL}, outcome{assign: "canary", wake: leaseDur - 3*time.Second}},
		{"only a silent candidate: look again to ping it later", nil, true, "stable",
			[]cand{silentSL}, outcome{wake: leaseDur - 3*time.Second}},
		{"a silent candidate is pinged again after its lease", nil, true, "stable",
			[]cand{func() cand { c := silentSL; c.ping = now.Add(-leaseDur); return c }()}, outcome{pings: []string{"stable-local"}, wake: 2 * time.Second}},
		{"nobody live: nothing", nil, true, "stable",
			[]cand{{name: "dead", key: "stable", renew: now.Add(-time.Hour)}}, outcome{wake: -1}},
		{"mixed strategies: left alone", nil, true, "stable",
			[]cand{sl, foreign}, outcome{wake: -1}},
		{"prefer the default over the holder", withStrategy(held("stable-local", "stable")), false, "canary",
			[]cand{cn, sr, sl}, outcome{prefer: "canary", wake: leaseDur}},
		{"prefer local over remote holder", withStrategy(held("stable-remote", "^stable")), false, "stable",
			[]cand{sr, sl}, outcome{prefer: "stable-local", wake: leaseDur}},
		{"best holder: nothing", withStrategy(held("stable-local", "stable")), false, "stable",
			[]cand{cn, sr, sl}, outcome{wake: leaseDur}},
		{"steal rule says no: nothing", withStrategy(held("canary", "canary")), false, "",
			[]cand{cn, sl}, outcome{wake: leaseDur}},
		{"non-default never displaces another non-default", withStrategy(held("blue", "blue")), false, "stable",
			[]cand{cn, {name: "blue", key: "blue", preempts: true, renew: now}}, outcome{wake: leaseDur}},
		{"per-revision election: never prefer", withStrategy(held("stable-remote", "^stable")), false, "stable",
			[]cand{perRev(sr), perRev(sl)}, outcome{wake: leaseDur}},
		{"one per-revision candidate is enough", withStrategy(held("stable-remote", "^stable")), false, "stable",
			[]cand{sr, perRev(sl)}, outcome{wake: leaseDur}},
		{"clear after the default flips back", withPreferred(held("stable-local", "stable"), "canary", "canary"), false, "stable",
			[]cand{cn, sl}, outcome{clear: true, wake: leaseDur}},
		{"clear when the preferred candidate is gone", withPreferred(held("stable-remote", "^stable"), "stable-local", "stable"), false, "stable",
			[]cand{sr}, outcome{clear: true, wake: leaseDur}},
		{"clear on a per-revision election", withPreferred(held("stable-remote", "^stable"), "stable-local", "stable"), false, "stable",
			[]cand{perRev(sr), perRev(sl)}, outcome{clear: true, wake: leaseDur}},
		{"preferred without its key annotation: written again", withPreferred(held("stable-local", "stable"), "canary", ""), false, "canary",
			[]cand{cn, sl}, outcome{prefer: "canary", wake: leaseDur}},
		{"already preferred: nothing", withPreferred(held("stable-local", "stable"), "canary", "canary"), false, "canary",
			[]cand{cn, sl}, outcome{wake: leaseDur}},
		{"ping a stale better candidate before preferring it", withStrategy(held("stable-remote", "^stable")), false, "stable",
			[]cand{sr, staleSL}, outcome{pings: []string{"stable-local"}, wake: 2 * time.Second}},
		{"keeping a preference needs no new ping", withPreferred(held("stable-remote", "^stable"), "stable-local", "stable"), false, "stable",
			[]cand{sr, staleSL}, outcome{wake: leaseDur}},
		{"preferred holder now holds: cleared", withPreferred(held("canary", "canary"), "canary", "canary"), false, "canary",
			[]cand{cn, sl}, outcome{clear: true, wake: leaseDur}},
		{"set the strategy of a held lease", held("stable-local", "stable"), false, "stable",
			[]cand{sl}, outcome{setStrategy: true, wake: leaseDur}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := view{now: now, lease: tc.lease, vacant: tc.vacant, defaultRevision: tc.def, ackTimeout: 2 * time.Second}
			if !tc.vacant {
				v.expiresAt = now.Add(leaseDur)
			}
			for _, c := range tc.cands {
				v.cands = append(v.cands, c.candidate(now))
			}
			got := summarise(decide(v), now)
			if !equalOutcome(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func equalOutcome(a, b outcome) bool {
	if len(a.pings) != len(b.pings) {
		return false
	}
	for i := range a.pings {
		if a.pings[i] != b.pings[i] {
			return false
		}
	}
	a.pings, b.pings = nil, nil
	return a.assign == b.assign && a.prefer == b.prefer && a.clear == b.clear && a.setStrategy == b.setStrategy && a.wake == b.wake
}

// TestDecideOwnPingCounts checks that a ping the cache does not show yet is
// not sent twice.
func TestDecideOwnPingCounts(t *testing.T) {
	now := t0
	c := cand{name: "s", key: "stable", preempts: true, renew: now.Add(-leaseDur - time.Second)}
	v := view{now: now, vacant: true, defaultRevision: "stable", ackTimeout: 2 * time.Second,
		cands: []Candidate{c.candidate(now)}, pinged: map[string]time.Time{"s": now.Add(-time.Second)}}
	if got := summarise(decide(v), now); len(got.pings) != 0 || got.wake != time.Second {
		t.Fatalf("got %+v, want no ping and a wake in 1s", got)
	}
}
