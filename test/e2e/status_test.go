package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// statusEntry is one lock as "meshd status -o json" prints it.
type statusEntry struct {
	Election      string `json:"election"`
	Lock          string `json:"lock"`
	Namespace     string `json:"namespace"`
	Holder        string `json:"holder"`
	HolderKey     string `json:"holderKey"`
	Revision      string `json:"revision"`
	Remote        bool   `json:"remote"`
	LeaseDuration string `json:"leaseDuration"`
	Transitions   int    `json:"transitions"`
}

// meshdStatus runs "meshd status" against the test's namespace.
func (m *mesh) meshdStatus(args ...string) string {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args = append([]string{"status", "--kubeconfig=" + m.kubeconfig, "--namespace=" + m.ns}, args...)
	cmd := exec.CommandContext(ctx, meshdBinary, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		m.t.Fatalf("meshd %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// "meshd status" shows every lock and who holds it, as a table and as JSON.
func TestStatusCommandShowsHolders(t *testing.T) {
	m := newMesh(t)
	m.start("stable-1", "stable")
	m.watchLeaders([]string{namespaceLock, statusLock, revisionLock("stable")}, in("stable-1")).wait(t, 10*time.Second)
	m.start("canary-1", "canary", withRemote())
	m.waitLeader(revisionLock("canary"), 10*time.Second, in("canary-1"))

	var entries []statusEntry
	out := m.meshdStatus("-o", "json")
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("meshd status -o json: %v\n%s", err, out)
	}
	want := map[string]statusEntry{
		namespaceLock:          {Lock: "ConfigMap", Holder: "stable-1", HolderKey: "stable", Revision: "stable"},
		statusLock:             {Lock: "Lease", Holder: "stable-1", HolderKey: "stable", Revision: "stable"},
		revisionLock("stable"): {Lock: "Lease", Holder: "stable-1", HolderKey: "stable", Revision: "stable"},
		revisionLock("canary"): {Lock: "Lease", Holder: "canary-1", HolderKey: "canary", Revision: "canary"},
	}
	got := map[string]statusEntry{}
	for _, e := range entries {
		got[e.Election] = e
		if e.Namespace != m.ns || e.LeaseDuration != "2s" {
			t.Errorf("%s: namespace %q, lease %q; want %q, 2s", e.Election, e.Namespace, e.LeaseDuration, m.ns)
		}
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("meshd status -o json has no %s:\n%s", name, out)
			continue
		}
		if g.Lock != w.Lock || g.Holder != w.Holder || g.HolderKey != w.HolderKey || g.Revision != w.Revision || g.Remote {
			t.Errorf("%s: got %+v, want %+v", name, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("meshd status -o json lists %d locks, want %d:\n%s", len(got), len(want), out)
	}

	table := m.meshdStatus()
	// The table ends at the first blank line; the default revision follows.
	rows, footer, _ := strings.Cut(strings.TrimSpace(table), "\n\n")
	lines := strings.Split(rows, "\n")
	if !strings.HasPrefix(strings.TrimSpace(footer), "Default revision:") {
		t.Errorf("meshd status does not say the default revision after the table:\n%s", table)
	}
	if len(lines) != 1+len(want) || !strings.HasPrefix(lines[0], "ELECTION") {
		t.Fatalf("meshd status: want a header and %d rows, got:\n%s", len(want), table)
	}
	for _, line := range lines[1:] {
		fields := strings.Fields(line)
		w, ok := want[fields[0]]
		if !ok || len(fields) < 3 || fields[1] != w.Lock || fields[2] != w.Holder {
			t.Errorf("meshd status row %q does not match %+v", line, w)
		}
	}
}
