package multicluster

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// "meshd status --clusters" shows the namespace election of both clusters,
// each held by its local instance, and says which remote cluster it could
// not read.
func TestStatusShowsEveryCluster(t *testing.T) {
	m := newMesh(t)
	m.plugRoot(m.west, m.root)
	m.linkRemote(m.east, m.west)
	m.linkRemote(m.west, m.east)
	m.putSecret(m.east, "broken", map[string][]byte{"north": []byte("{{{")})
	m.start("meshd-east", m.east)
	m.start("meshd-west", m.west)
	m.waitLeader(m.east, "meshd-east", "default", 10*time.Second)
	m.waitLeader(m.west, "meshd-west", "default", 10*time.Second)

	status := func(args ...string) (string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, meshdBinary, append([]string{"status", "--clusters", "--cluster-id=east",
			"--kubeconfig=" + m.east.kubeconfigPath, "-n", m.ns}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("meshd status: %v\n%s", err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	table, warnings := status()
	t.Logf("meshd status --clusters:\n%s", table)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "CLUSTER") {
		t.Fatalf("want a header and one row per cluster:\n%s", table)
	}
	for i, want := range [][]string{{"east", lockName, "meshd-east", "default"}, {"west", lockName, "meshd-west", "default"}} {
		if got := strings.Fields(lines[i+1]); len(got) < 5 || got[0] != want[0] || got[1] != want[1] || got[3] != want[2] || got[4] != want[3] {
			t.Errorf("row %d: %q, want cluster, election, holder and key %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(warnings, `cluster "north" from Secret `+m.ns+`/broken: not a kubeconfig`) {
		t.Errorf("stderr %q does not report the broken Secret", warnings)
	}

	out, _ := status("-o", "json")
	var locks []struct {
		Cluster  string `json:"cluster"`
		Election string `json:"election"`
		Holder   string `json:"holder"`
	}
	if err := json.Unmarshal([]byte(out), &locks); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, l := range locks {
		if l.Election == lockName {
			got[l.Cluster] = l.Holder
		}
	}
	if got["east"] != "meshd-east" || got["west"] != "meshd-west" || len(got) != 2 {
		t.Errorf("-o json holders %v, want east: meshd-east, west: meshd-west\n%s", got, out)
	}
}
