// Package monitoring tests what meshd ships for monitoring: the alert rules
// (evaluated by Prometheus's own rule engine on recorded series, as
// "promtool test rules" does), and the Grafana dashboard, the alerts and
// docs/metrics.md against the series a running meshd exports.
package monitoring

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

var (
	repoRoot   = mustRepoRoot()
	alertsFile = filepath.Join(repoRoot, "deploy", "charts", "meshd", "files", "alerts.yaml")
)

func mustRepoRoot() string {
	wd, err := os.Getwd()
	if err == nil {
		wd, err = testcluster.RepoRoot(wd)
	}
	if err != nil {
		panic(err)
	}
	return wd
}

// firing is one firing alert: its name and the labels it must carry.
type firing struct {
	alert  string
	labels map[string]string
}

func (f firing) String() string {
	var kv []string
	for k, v := range f.labels {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return f.alert + "{" + strings.Join(kv, ",") + "}"
}

// evalAlerts loads series (promqltest's "load" syntax), evaluates meshd's
// rule groups every minute from time 0 to the last of at, and returns the
// alerts firing at each time of at.
func evalAlerts(t *testing.T, series string, at ...time.Duration) map[time.Duration][]firing {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	suite, err := promqltest.NewLazyLoader(series, promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true, Parser: p})
	if err != nil {
		t.Fatalf("series: %v", err)
	}
	t.Cleanup(func() { _ = suite.Close() })
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       slog.New(slog.DiscardHandler),
		Parser:       p,
	})
	groups, errs := m.LoadGroups(time.Minute, labels.EmptyLabels(), "", nil, false, alertsFile)
	if errs != nil {
		t.Fatalf("load %s: %v", alertsFile, errs)
	}
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true)
			}
		}
	}
	got := map[time.Duration][]firing{}
	last := slices.Max(at)
	start := time.Unix(0, 0).UTC()
	for d := time.Duration(0); d <= last; d += time.Minute {
		suite.WithSamplesTill(start.Add(d), func(err error) {
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range groups {
				g.Eval(suite.Context(), start.Add(d))
				for _, r := range g.Rules() {
					if r.LastError() != nil {
						t.Fatalf("rule %s at %v: %v", r.Name(), d, r.LastError())
					}
				}
			}
		})
		if !slices.Contains(at, d) {
			continue
		}
		got[d] = []firing{}
		for _, g := range groups {
			for _, r := range g.Rules() {
				ar, ok := r.(*rules.AlertingRule)
				if !ok {
					continue
				}
				for _, a := range ar.ActiveAlerts() {
					if a.State == rules.StateFiring {
						got[d] = append(got[d], firing{alert: ar.Name(), labels: a.Labels.Map()})
					}
				}
			}
		}
	}
	return got
}

// matches reports whether got holds exactly the alerts of want, each
// carrying at least the labels want names.
func matches(got, want []firing) bool {
	if len(got) != len(want) {
		return false
	}
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if used[i] || g.alert != w.alert {
				continue
			}
			ok := true
			for k, v := range w.labels {
				ok = ok && g.labels[k] == v
			}
			if ok {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func TestAlerts(t *testing.T) {
	const status = `name="meshd-status-leader"`
	for _, tc := range []struct {
		name   string
		series string
		want   map[time.Duration][]firing // nil slice: nothing fires
	}{
		{
			name: "no leader and no holder",
			series: `load 1m
				meshd_election_leader{` + status + `,revision="stable",instance="a"} 0x10
				meshd_election_leader{` + status + `,revision="stable",instance="b"} 0x10`,
			want: map[time.Duration][]firing{
				0:               nil, // pending first
				2 * time.Minute: {{"MeshdElectionWithoutLeader", map[string]string{"name": "meshd-status-leader", "severity": "critical"}}},
			},
		},
		{
			name: "istiod holds a shared election",
			series: `load 1m
				meshd_election_leader{name="istio-namespace-controller-election",revision="stable",instance="a"} 0x10
				meshd_election_holder_info{name="istio-namespace-controller-election",revision="stable",instance="a",holder="istiod-7c9",holder_key="stable"} 1x10`,
			want: map[time.Duration][]firing{5 * time.Minute: nil},
		},
		{
			name: "one instance leads",
			series: `load 1m
				meshd_election_leader{` + status + `,revision="stable",instance="a"} 1x10
				meshd_election_leader{` + status + `,revision="stable",instance="b"} 0x10`,
			want: map[time.Duration][]firing{5 * time.Minute: nil},
		},
		{
			name: "a failover shorter than the alert's wait",
			series: `load 30s
				meshd_election_leader{` + status + `,revision="stable",instance="a"} 1 0 0 0x16
				meshd_election_leader{` + status + `,revision="stable",instance="b"} 0 0 1 1x16`,
			want: map[time.Duration][]firing{time.Minute: nil, 2 * time.Minute: nil, 5 * time.Minute: nil},
		},
		{
			name: "lock writes keep failing",
			series: `load 1m
				meshd_election_failing{` + status + `,revision="canary",instance="a"} 1x10`,
			want: map[time.Duration][]firing{
				3 * time.Minute: nil,
				6 * time.Minute: {{"MeshdElectionFailing", map[string]string{"name": "meshd-status-leader", "revision": "canary"}}},
			},
		},
		{
			name: "renewals keep failing",
			series: `load 1m
				meshd_election_renew_failures_total{` + status + `,revision="stable",instance="a"} 0+1x30`,
			want: map[time.Duration][]firing{
				5 * time.Minute:  nil,
				16 * time.Minute: {{"MeshdRenewFailures", map[string]string{"name": "meshd-status-leader"}}},
			},
		},
		{
			name: "one failed renewal",
			series: `load 1m
				meshd_election_renew_failures_total{` + status + `,revision="stable",instance="a"} 0 0 1 1x27`,
			want: map[time.Duration][]firing{16 * time.Minute: nil},
		},
		{
			name: "a steal cycle",
			series: `load 1m
				meshd_election_steal_cycles_total{` + status + `,revision="stable",instance="a"} 0 0 1 1x10
				meshd_election_preemption_suspended{` + status + `,revision="stable",instance="a"} 0 0 1 1x10`,
			want: map[time.Duration][]firing{
				time.Minute:     nil,
				3 * time.Minute: {{"MeshdStealCycle", map[string]string{"name": "meshd-status-leader"}}},
			},
		},
		{
			name: "run functions fail repeatedly",
			series: `load 1m
				meshd_election_run_failures_total{` + status + `,revision="stable",instance="a"} 0 1 2 3 4x10`,
			want: map[time.Duration][]firing{
				2 * time.Minute: nil,
				4 * time.Minute: {{"MeshdRunFunctionFailures", map[string]string{"name": "meshd-status-leader"}}},
			},
		},
		{
			name: "two run failures",
			series: `load 1m
				meshd_election_run_failures_total{` + status + `,revision="stable",instance="a"} 0 1 2 2x10`,
			want: map[time.Duration][]firing{6 * time.Minute: nil},
		},
		{
			name: "session fallback",
			series: `load 1m
				meshd_election_session_fallback{` + status + `,revision="stable",instance="a"} 1x20`,
			want: map[time.Duration][]firing{
				10 * time.Minute: nil,
				16 * time.Minute: {{"MeshdSessionFallback", map[string]string{"name": "meshd-status-leader", "severity": "info"}}},
			},
		},
		{
			name: "work blocked and not ready",
			series: `load 1m
				meshd_election_problems{name="istio-namespace-controller-election",revision="stable",instance="a"} 1x20
				meshd_ready{revision="stable",instance="a"} 0x20
				meshd_ready{revision="stable",instance="b"} 1x20`,
			want: map[time.Duration][]firing{
				5 * time.Minute: nil,
				11 * time.Minute: {
					{"MeshdWorkBlocked", map[string]string{"name": "istio-namespace-controller-election"}},
					{"MeshdNotReady", map[string]string{"instance": "a"}},
				},
			},
		},
		{
			name: "controller errors",
			series: `load 1m
				meshd_controller_errors_total{controller="namespace",revision="stable",instance="a"} 0+2x30`,
			want: map[time.Duration][]firing{
				10 * time.Minute: nil,
				21 * time.Minute: {{"MeshdControllerErrors", map[string]string{"controller": "namespace"}}},
			},
		},
		{
			name: "a healthy mesh",
			series: `load 1m
				meshd_election_leader{` + status + `,revision="stable",instance="a"} 1x30
				meshd_election_renew_failures_total{` + status + `,revision="stable",instance="a"} 0x30
				meshd_election_run_failures_total{` + status + `,revision="stable",instance="a"} 0x30
				meshd_election_steal_cycles_total{` + status + `,revision="stable",instance="a"} 0x30
				meshd_election_preemption_suspended{` + status + `,revision="stable",instance="a"} 0x30
				meshd_election_session_fallback{` + status + `,revision="stable",instance="a"} 0x30
				meshd_election_failing{` + status + `,revision="stable",instance="a"} 0x30
				meshd_election_problems{` + status + `,revision="stable",instance="a"} 0x30
				meshd_ready{revision="stable",instance="a"} 1x30
				meshd_controller_errors_total{controller="status",revision="stable",instance="a"} 0x30`,
			want: map[time.Duration][]firing{time.Minute: nil, 20 * time.Minute: nil},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var at []time.Duration
			for d := range tc.want {
				at = append(at, d)
			}
			got := evalAlerts(t, tc.series, at...)
			for _, d := range at {
				if !matches(got[d], tc.want[d]) {
					t.Errorf("at %v: firing %v, want %v", d, got[d], tc.want[d])
				}
			}
		})
	}
}

// Every alert in the file is exercised above, firing at least once.
func TestEveryAlertIsTested(t *testing.T) {
	src, err := os.ReadFile("alerts_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range alertNames(t) {
		if !strings.Contains(string(src), fmt.Sprintf("{%q, map", name)) {
			t.Errorf("alert %s never expected to fire in TestAlerts", name)
		}
	}
}
