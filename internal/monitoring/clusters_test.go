package monitoring

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshd-io/meshd/pkg/election"
)

// clusterSource is a ClusterSource.
type clusterSource struct {
	fakeSource
	clusters []Cluster
}

func (c *clusterSource) Clusters() []Cluster { return c.clusters }

func TestDebugClusters(t *testing.T) {
	src := &clusterSource{clusters: []Cluster{
		{ID: "east", State: "local"},
		{ID: "west", Secret: "istio-system/istio-remote-secret-west", State: "running"},
		{ID: "north", Secret: "istio-system/broken", State: "invalid", Problems: []string{"not a kubeconfig"}},
	}}
	src.statuses = []Election{{Status: election.Status{Name: "istio-namespace-controller-election"}, Identity: "a", Cluster: "west"}}
	ts := newTestServer(t, src, prometheus.NewRegistry())

	code, hdr, body := get(t, ts, "/debug/clusters")
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("/debug/clusters: %d %q", code, hdr.Get("Content-Type"))
	}
	var got []Cluster
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].Secret != "istio-system/istio-remote-secret-west" || got[2].Problems[0] != "not a kubeconfig" {
		t.Errorf("decoded %+v", got)
	}
	if strings.Contains(body, `"reason"`) || strings.Contains(body, `"secret": ""`) {
		t.Errorf("empty fields are not left out:\n%s", body)
	}
	if _, _, body := get(t, ts, "/debug/elections"); !strings.Contains(body, `"cluster": "west"`) {
		t.Errorf("/debug/elections lacks the cluster:\n%s", body)
	}

	src.clusters = nil
	if _, _, body := get(t, ts, "/debug/clusters"); strings.TrimSpace(body) != "[]" {
		t.Errorf("no clusters: %q, want []", body)
	}

	// A Source that knows one cluster serves no /debug/clusters, and its
	// elections carry no cluster field.
	plain := &fakeSource{statuses: []Election{{Status: election.Status{Name: "x"}, Identity: "a"}}}
	single := newTestServer(t, plain, prometheus.NewRegistry())
	if code, _, _ := get(t, single, "/debug/clusters"); code != http.StatusNotFound {
		t.Errorf("/debug/clusters without a ClusterSource: %d, want 404", code)
	}
	if _, _, body := get(t, single, "/debug/elections"); strings.Contains(body, "cluster") {
		t.Errorf("/debug/elections of a single cluster names one:\n%s", body)
	}
}
