package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// istiodRecord is a lock record exactly as istiod writes it.
const istiodRecord = `{"holderIdentity":"istiod-a","holderKey":"canary","leaseDurationSeconds":30,"acquireTime":"2026-01-02T03:04:05Z","renewTime":"2026-01-02T03:04:20Z","leaderTransitions":3}`

func TestStatus(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Nothing there yet.
	code, stdout, stderr := meshd(t, ctx, "status", "--kubeconfig", kubeconfig, "--namespace", ns)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "No election locks found in namespace "+ns) {
		t.Fatalf("empty namespace: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// A namespace that does not exist is an error, in both formats.
	for _, format := range []string{"table", "json"} {
		code, stdout, stderr = meshd(t, ctx, "status", "--kubeconfig", kubeconfig, "-n", "nosuchns", "-o", format)
		if code != 1 || stdout != "" || !strings.Contains(stderr, `namespace "nosuchns" does not exist`) {
			t.Fatalf("missing namespace, -o %s: exit %d, stdout %q, stderr %q", format, code, stdout, stderr)
		}
	}

	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "istio-namespace-controller-election", Annotations: map[string]string{
			resourcelock.LeaderAnnotationKey: istiodRecord,
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "broken-lock", Annotations: map[string]string{
			resourcelock.LeaderAnnotationKey: `{not json`,
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "not-a-lock"}, Data: map[string]string{"a": "b"}},
	} {
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "istio-gateway-deployment-stable"}}
	resourcelock.ApplyRecordToLease(resourcelock.Record{
		HolderIdentity:       "meshd-b",
		HolderKey:            "^stable",
		LeaseDurationSeconds: 15,
		AcquireTime:          metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)),
		RenewTime:            metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 25, 0, time.UTC)),
		LeaderTransitions:    1,
	}, lease)
	if _, err := c.Client.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	clock = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 30, 0, time.UTC) }
	t.Cleanup(func() { clock = time.Now })

	code, stdout, stderr = meshd(t, ctx, "status", "--kubeconfig", kubeconfig, "--namespace", ns)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := tableRows(stdout)
	want := [][]string{
		{"ELECTION", "LOCK", "HOLDER", "KEY", "REVISION", "REMOTE", "RENEWED", "EXPIRES IN", "TRANSITIONS"},
		{"broken-lock", "ConfigMap", "<invalid record>", "-", "-", "false", "-", "-", "0"},
		{"istio-namespace-controller-election", "ConfigMap", "istiod-a", "canary", "canary", "false", "10s ago", "20s", "3"},
		{"istio-gateway-deployment-stable", "Lease", "meshd-b", "^stable", "stable", "true", "5s ago", "10s", "1"},
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d:\n%s", len(rows), len(want), stdout)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d = %q, want %q", i, rows[i], want[i])
		}
	}
	if !strings.Contains(stderr, "warning: ConfigMap "+ns+"/broken-lock:") {
		t.Errorf("no warning about the broken record: %q", stderr)
	}
	webhook := "istio-revision-tag-default-" + ns
	if want := "\nDefault revision: none known (no istio.io/rev label on MutatingWebhookConfiguration " + webhook; !strings.Contains(stdout, want) {
		t.Errorf("status without a default revision lacks %q:\n%s", want, stdout)
	}
	wh := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook,
		Labels: map[string]string{"istio.io/rev": "canary"}}}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, wh, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, webhook, metav1.DeleteOptions{})
	})
	_, stdout, _ = meshd(t, ctx, "status", "--kubeconfig", kubeconfig, "--namespace", ns)
	if want := "\nDefault revision: canary (label istio.io/rev of MutatingWebhookConfiguration " + webhook + ").\n"; !strings.Contains(stdout, want) {
		t.Errorf("status lacks %q:\n%s", want, stdout)
	}

	// An expired lock says so.
	clock = func() time.Time { return time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC) }
	_, stdout, _ = meshd(t, ctx, "status", "--kubeconfig", kubeconfig, "--namespace", ns)
	if rows := tableRows(stdout); len(rows) != 4 || rows[2][6] != "55m ago" || rows[2][7] != "expired" {
		t.Errorf("expired lock rows: %q", rows)
	}

	// JSON, for scripts.
	code, stdout, stderr = meshd(t, ctx, "status", "--kubeconfig", kubeconfig, "--namespace", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var locks []map[string]any
	if err := json.Unmarshal([]byte(stdout), &locks); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if len(locks) != 3 {
		t.Fatalf("%d locks in JSON:\n%s", len(locks), stdout)
	}
	cm, ls := locks[1], locks[2]
	for k, v := range map[string]any{
		"election": "istio-namespace-controller-election", "lock": "ConfigMap", "namespace": ns, "holder": "istiod-a",
		"holderKey": "canary", "revision": "canary", "remote": false, "acquireTime": "2026-01-02T03:04:05Z",
		"renewTime": "2026-01-02T03:04:20Z", "leaseDuration": "30s", "transitions": 3.0,
	} {
		if cm[k] != v {
			t.Errorf("ConfigMap lock %s = %#v, want %#v", k, cm[k], v)
		}
	}
	if ls["lock"] != "Lease" || ls["holder"] != "meshd-b" || ls["holderKey"] != "^stable" || ls["remote"] != true || ls["leaseDuration"] != "15s" {
		t.Errorf("Lease lock: %v", ls)
	}
	if locks[0]["error"] == nil || locks[0]["error"] == "" {
		t.Errorf("broken lock without error: %v", locks[0])
	}
}

func TestStatusWithoutCluster(t *testing.T) {
	code, _, stderr := meshd(t, context.Background(), "status", "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
	if code != 1 || !strings.Contains(stderr, "missing") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// tableRows splits tabwriter output into cells (columns are separated by
// at least two spaces; cells such as "10s ago" hold single spaces).
func tableRows(out string) [][]string {
	var rows [][]string
	sep := regexp.MustCompile(`\s{2,}`)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" { // the end of the table of locks
			break
		}
		rows = append(rows, sep.Split(strings.TrimSpace(line), -1))
	}
	return rows
}
