package monitoring

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/meshd-io/meshd/pkg/election"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSource is a Source whose answers the test sets.
type fakeSource struct {
	mu       sync.Mutex
	statuses []Election
	healthy  error
	ready    error
}

func (f *fakeSource) Elections() []Election {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.statuses
}

func (f *fakeSource) Healthy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.healthy
}

func (f *fakeSource) Ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

func newTestServer(t *testing.T, src Source, g prometheus.Gatherer) *httptest.Server {
	t.Helper()
	s, err := New(Options{Source: src, Gatherer: g})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, ts *httptest.Server, path string) (int, http.Header, string) {
	t.Helper()
	resp, err := ts.Client().Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

func TestNewRequiresSource(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without a Source succeeded")
	}
}

func TestHealthz(t *testing.T) {
	src := &fakeSource{}
	ts := newTestServer(t, src, prometheus.NewRegistry())

	if code, _, body := get(t, ts, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("healthy: %d %q", code, body)
	}
	src.mu.Lock()
	src.healthy = errors.New(`election "istio-leader": leader has not renewed for 46s (lease 30s, tolerance 15s)`)
	src.mu.Unlock()
	code, hdr, body := get(t, ts, "/healthz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("unhealthy: status %d, want 503", code)
	}
	if !strings.Contains(body, "has not renewed for 46s") {
		t.Fatalf("unhealthy body %q does not say why", body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q", ct)
	}
}

func TestReadyz(t *testing.T) {
	src := &fakeSource{ready: errors.New("default revision watcher has not synced")}
	ts := newTestServer(t, src, prometheus.NewRegistry())

	if code, _, body := get(t, ts, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not synced") {
		t.Fatalf("not ready: %d %q", code, body)
	}
	src.mu.Lock()
	src.ready = nil
	src.mu.Unlock()
	if code, _, body := get(t, ts, "/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("ready: %d %q", code, body)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "meshd_test_things_total", Help: "Things."})
	reg.MustRegister(c)
	c.Add(3)
	ts := newTestServer(t, &fakeSource{}, reg)

	code, _, body := get(t, ts, "/metrics")
	if code != http.StatusOK || !strings.Contains(body, "meshd_test_things_total 3") {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
}

func TestDebugElections(t *testing.T) {
	changed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src := &fakeSource{statuses: []Election{{Status: election.Status{
		ID: election.NamespaceController, Lock: election.ConfigMapLock, Namespace: "istio-system",
		Name: election.NamespaceController, Leader: true, Holder: "meshd-a", HolderKey: "^canary",
		Revision: "canary", Remote: true, Cycle: 2, Transitions: 5, LastTransitionTime: changed, Mode: election.Racing,
	}, Identity: "meshd-a", Problems: []string{"no mesh root certificate"}}, {Status: election.Status{
		ID: "meshd-revision", Lock: election.LeaseLock, Namespace: "istio-system",
		Name: "meshd-revision-canary", Holder: "meshd-b", HolderKey: "canary",
		Revision: "canary", Cycle: 1, LastError: "forbidden", Mode: election.Coordinated,
		Strategy: "meshd.io/prioritized", PreferredHolder: "meshd-revision-canary-meshd-c-0a1b2c3d4e",
	}, Identity: "host_0123456789abcdef"}}}
	ts := newTestServer(t, src, prometheus.NewRegistry())

	code, hdr, body := get(t, ts, "/debug/elections")
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q", code, hdr.Get("Content-Type"))
	}
	// Check the wire names, not just a round trip through the same struct.
	var raw []map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if len(raw) != 2 {
		t.Fatalf("got %d elections:\n%s", len(raw), body)
	}
	want := map[string]any{
		"id": "istio-namespace-controller-election", "lock": "ConfigMap", "namespace": "istio-system",
		"name": "istio-namespace-controller-election", "leader": true, "holder": "meshd-a", "holderKey": "^canary",
		"revision": "canary", "remote": true, "cycle": 2.0, "transitions": 5.0, "lastTransitionTime": "2026-01-02T03:04:05Z",
		"identity": "meshd-a", "mode": "racing",
	}
	for k, v := range want {
		if raw[0][k] != v {
			t.Errorf("%s = %#v, want %#v", k, raw[0][k], v)
		}
	}
	if p, _ := raw[0]["problems"].([]any); len(p) != 1 || p[0] != "no mesh root certificate" {
		t.Errorf("problems = %#v", raw[0]["problems"])
	}
	if raw[1]["lock"] != "Lease" || raw[1]["name"] != "meshd-revision-canary" || raw[1]["lastError"] != "forbidden" ||
		raw[1]["identity"] != "host_0123456789abcdef" || raw[1]["mode"] != "coordinated" ||
		raw[1]["strategy"] != "meshd.io/prioritized" || raw[1]["preferredHolder"] != "meshd-revision-canary-meshd-c-0a1b2c3d4e" {
		t.Errorf("second election: %v", raw[1])
	}
	for _, k := range []string{"strategy", "preferredHolder"} {
		if _, ok := raw[0][k]; ok {
			t.Errorf("racing election shows %s: %v", k, raw[0])
		}
	}
	if _, ok := raw[1]["problems"]; ok {
		t.Errorf("second election lists problems: %v", raw[1])
	}
	// A follower since it started has no transition time, not year 1.
	if v, ok := raw[1]["lastTransitionTime"]; ok {
		t.Errorf("follower's lastTransitionTime = %v, want none", v)
	}
	// And it reads back into the same Election.
	var back []Election
	if err := json.Unmarshal([]byte(body), &back); err != nil || len(back) != 2 ||
		!back[0].LastTransitionTime.Equal(changed) || !back[1].LastTransitionTime.IsZero() || back[0].Identity != "meshd-a" ||
		len(back[0].Problems) != 1 || back[1].Strategy != "meshd.io/prioritized" {
		t.Errorf("read back: %+v, %v", back, err)
	}

	// No elections is an empty array, not null.
	empty := newTestServer(t, &fakeSource{}, prometheus.NewRegistry())
	if _, _, body := get(t, empty, "/debug/elections"); strings.TrimSpace(body) != "[]" {
		t.Fatalf("no elections: %q", body)
	}
}

func TestOnlyGet(t *testing.T) {
	ts := newTestServer(t, &fakeSource{}, prometheus.NewRegistry())
	resp, err := ts.Client().Post(ts.URL+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /healthz: %d, want 405", resp.StatusCode)
	}
	if code, _, _ := get(t, ts, "/nope"); code != http.StatusNotFound {
		t.Fatalf("unknown path: %d, want 404", code)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	s, err := New(Options{Source: &fakeSource{}, Gatherer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + ln.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %d", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if _, err := client.Get("http://" + ln.Addr().String() + "/readyz"); err == nil {
		t.Fatal("still serving after Serve returned")
	}
}

func TestServeReportsListenerFailure(t *testing.T) {
	s, err := New(Options{Source: &fakeSource{}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := s.Serve(context.Background(), ln); err == nil {
		t.Fatal("Serve on a closed listener returned nil")
	}
}
