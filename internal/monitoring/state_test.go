package monitoring

import (
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshd-io/meshd/pkg/election"
)

// /metrics carries the build, readiness and each election's holder as this
// process sees them, next to the program's own series, and follows the
// Source from one scrape to the next.
func TestStateSeries(t *testing.T) {
	src := &fakeSource{statuses: []Election{
		{Status: election.Status{Name: "istio-namespace-controller-election", Revision: "canary", Holder: "istiod-a", HolderKey: "stable", DefaultRevision: "stable"}},
		{Status: election.Status{Name: "meshd-status-leader", Revision: "canary", Leader: true, Holder: "meshd-canary-0", HolderKey: "canary",
			SessionFallback: true}, Problems: []string{"no mesh root"}},
		{Status: election.Status{Name: "meshd-revision-canary", Revision: "canary", LastError: "connection refused"}},
	}, ready: errors.New("starting")}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "meshd_own_total", Help: "Own."}))
	ts := newTestServer(t, src, reg)

	code, _, body := get(t, ts, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	goVersion := strings.TrimPrefix(runtime.Version(), "go")
	for _, want := range []string{
		"meshd_own_total 0",
		`meshd_build_info{commit="`,
		`go_version="` + goVersion + `"`,
		`meshd_ready{revision="canary"} 0`,
		`meshd_default_revision_info{default_revision="stable",revision="canary"} 1`,
		`meshd_election_holder_info{cluster="",holder="istiod-a",holder_key="stable",name="istio-namespace-controller-election",revision="canary"} 1`,
		`meshd_election_holder_info{cluster="",holder="meshd-canary-0",holder_key="canary",name="meshd-status-leader",revision="canary"} 1`,
		`meshd_election_session_fallback{cluster="",name="meshd-status-leader",revision="canary"} 1`,
		`meshd_election_session_fallback{cluster="",name="meshd-revision-canary",revision="canary"} 0`,
		`meshd_election_problems{cluster="",name="meshd-status-leader",revision="canary"} 1`,
		`meshd_election_failing{cluster="",name="meshd-revision-canary",revision="canary"} 1`,
		`meshd_election_failing{cluster="",name="meshd-status-leader",revision="canary"} 0`,
		`meshd_election_problems{cluster="",name="istio-namespace-controller-election",revision="canary"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `name="meshd-revision-canary",revision="canary",holder=`) ||
		strings.Contains(body, `holder="",`) {
		t.Errorf("a holder series for an election without a holder:\n%s", body)
	}

	src.mu.Lock()
	src.ready = nil
	src.mu.Unlock()
	if _, _, body = get(t, ts, "/metrics"); !strings.Contains(body, `meshd_ready{revision="canary"} 1`) {
		t.Errorf("meshd_ready did not follow /readyz:\n%s", body)
	}
}

// One election ID and revision exists once per cluster with remote
// clusters: the cluster label keeps their series apart (without it the
// scrape failed on duplicate series).
func TestStateSeriesPerCluster(t *testing.T) {
	src := &fakeSource{statuses: []Election{
		{Status: election.Status{Name: "istio-namespace-controller-election", Revision: "default", Holder: "a", HolderKey: "default"}, Cluster: "east"},
		{Status: election.Status{Name: "istio-namespace-controller-election", Revision: "default", Holder: "a", HolderKey: "^default"}, Cluster: "west"},
	}}
	reg := prometheusRegistry(t, newStateCollector(src))
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
	ts := newTestServer(t, src, prometheus.NewRegistry())
	_, _, body := get(t, ts, "/metrics")
	for _, want := range []string{
		`meshd_election_holder_info{cluster="east",holder="a",holder_key="default",name="istio-namespace-controller-election",revision="default"} 1`,
		`meshd_election_holder_info{cluster="west",holder="a",holder_key="^default",name="istio-namespace-controller-election",revision="default"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
}

// The collector passes the registry's own consistency checks, and a
// process without elections reports its build only.
func TestStateCollectorIsConsistent(t *testing.T) {
	reg := prometheusRegistry(t, newStateCollector(&fakeSource{}))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != "meshd_build_info" || len(families[0].GetMetric()) != 1 {
		t.Fatalf("without elections: %v; want meshd_build_info only", families)
	}
	// With elections, every series passes the pedantic checks too.
	reg = prometheusRegistry(t, newStateCollector(&fakeSource{statuses: []Election{
		{Status: election.Status{Name: "a", Revision: "stable", Holder: "x", HolderKey: "^stable"}},
		{Status: election.Status{Name: "b", Revision: "stable"}},
	}}))
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

func prometheusRegistry(t *testing.T, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return reg
}
