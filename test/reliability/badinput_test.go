package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/election/testknobs"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// TestCorruptRecordIsReplacedAfterALeaseWithAWarning writes a record that
// is not a record (100 KiB, over meshd's decoding limit but within the API
// server's) into a lock that also carries other content. Candidates treat
// it as held by an unknown holder for one lease, then replace it, keeping
// everything else, and say so with a Warning event.
func TestCorruptRecordIsReplacedAfterALeaseWithAWarning(t *testing.T) {
	ns := newNamespace(t, "corrupt")
	ctx := context.Background()
	garbage := `{"holderIdentity":"` + strings.Repeat("x", 100<<10) + `"}`
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: election.IngressController, Namespace: ns,
			Labels:      map[string]string{"keep": "label"},
			Annotations: map[string]string{resourcelock.LeaderAnnotationKey: garbage, "keep": "annotation"}},
		Data: map[string]string{"keep": "data"},
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l := &ledger.Ledger{}
	events := testknobs.EventRecorder(eventRecorder(t, cluster.Client))
	start := time.Now()
	a := startCandidate(t, "a", l)(election.NewLeaderElection(ns, "a", election.IngressController, "stable", cluster.Client, electionOptions(t, events)...))
	b := startCandidate(t, "b", l)(election.NewLeaderElection(ns, "b", election.IngressController, "stable", cluster.Client, electionOptions(t, events)...))
	testutil.Eventually(t, 3*bound, testutil.Check("a leader", func() bool { return a.leads.Load() || b.leads.Load() }))
	if waited := time.Since(start); waited < ttl-200*time.Millisecond {
		t.Fatalf("the corrupt lock was taken after %v, before a lease (%v) could have run out", waited, ttl)
	}
	got, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, election.IngressController, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["keep"] != "label" || got.Annotations["keep"] != "annotation" || got.Data["keep"] != "data" {
		t.Fatalf("replacing the record lost content: %v %v %v", got.Labels, got.Annotations, got.Data)
	}
	if _, err := resourcelock.DecodeRecord([]byte(got.Annotations[resourcelock.LeaderAnnotationKey])); err != nil {
		t.Fatalf("record still corrupt: %v", err)
	}
	testutil.Eventually(t, 10*time.Second, testutil.Check("a CorruptLeaderRecord warning event", func() bool {
		list, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Reason == elector.ReasonCorruptRecord && e.Type == corev1.EventTypeWarning &&
				e.InvolvedObject.Name == election.IngressController && strings.Contains(e.Message, "treated as expired after") {
				return true
			}
		}
		return false
	}))
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("overlaps: %+v", o)
	}
}

// TestAPIServerRejectsRecordsItCannotStore: a 1 MiB annotation and a Lease
// with a lease duration that is not positive never reach a candidate; the
// writer gets a clear Invalid error and the lock is unchanged.
func TestAPIServerRejectsRecordsItCannotStore(t *testing.T) {
	ns := newNamespace(t, "too-big")
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lock", Namespace: ns,
		Annotations: map[string]string{resourcelock.LeaderAnnotationKey: strings.Repeat("x", 1<<20)}}}
	_, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "annotations") {
		t.Fatalf("1 MiB annotation: %v; want an Invalid error about annotations", err)
	}
	for _, secs := range []int32{-30, 0} {
		holder := "x"
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lease%d", secs+100), Namespace: ns},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs}}
		_, err := cluster.Client.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "leaseDurationSeconds") {
			t.Fatalf("Lease with leaseDurationSeconds %d: %v; want an Invalid error", secs, err)
		}
	}
}

// TestMissingNamespaceIsReportedAndRecovered: an election in a namespace
// that does not exist yet reports why it cannot lead, retries at the retry
// period (not in a loop), and leads once the namespace is created.
func TestMissingNamespaceIsReportedAndRecovered(t *testing.T) {
	ns := fmt.Sprintf("not-yet-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_ = cluster.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	client, ft := faultyClient(t, cluster.Config)
	l := &ledger.Ledger{}
	c := startCandidate(t, "a", l)(election.NewLeaderElection(ns, "a", election.IngressController, "stable", client, electionOptions(t)...))
	testutil.Eventually(t, 10*time.Second, testutil.Check("an error naming the namespace", func() bool {
		return strings.Contains(c.lastError(), `namespaces "`+ns+`" not found`)
	}))
	before := ft.requests.Load()
	time.Sleep(3 * time.Second)
	// Each try is a GET and a CREATE; one try per 0.5-1.1s retry period,
	// plus the watch's list and watch calls.
	if n := ft.requests.Load() - before; n > 25 {
		t.Fatalf("%d requests in 3s while the namespace is missing: retrying in a loop", n)
	}
	if c.leads.Load() {
		t.Fatal("leads without a lock")
	}
	if _, err := cluster.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	testutil.Eventually(t, bound, testutil.Check("the candidate to lead once the namespace exists", c.leads.Load))
	t.Logf("led %v after the namespace was created", time.Since(created).Round(time.Millisecond))
}

// TestMissingRBACIsReportedAndRecovered: a candidate whose account may do
// nothing says "forbidden" and never leads; granted only reads, it follows
// the lock through its watch but still cannot write, and must not retry the
// write in a loop once the lock's holder has died (it did, at hundreds of
// requests per second, before the elector fell back to the retry period);
// granted writes, it leads.
func TestMissingRBACIsReportedAndRecovered(t *testing.T) {
	ns := newNamespace(t, "rbac")
	ctx := context.Background()
	// The lock of a holder that died: expired a second after it is seen.
	now := metav1.NewTime(time.Now())
	dead := resourcelock.Record{HolderIdentity: "ghost", HolderKey: "stable", LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now}
	_, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: election.IngressController, Namespace: ns,
		Annotations: map[string]string{resourcelock.LeaderAnnotationKey: string(resourcelock.EncodeRecord(dead))},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cluster.ServiceAccountConfig(ctx, ns, "meshd")
	if err != nil {
		t.Fatal(err)
	}
	client, ft := faultyClient(t, cfg)
	l := &ledger.Ledger{}
	c := startCandidate(t, "a", l)(election.NewLeaderElection(ns, "a", election.IngressController, "stable", client, electionOptions(t)...))
	testutil.Eventually(t, 10*time.Second, testutil.Check("a forbidden error", func() bool { return strings.Contains(c.lastError(), "forbidden") }))
	if msg := c.lastError(); !strings.Contains(msg, "ConfigMap "+ns+"/"+election.IngressController) {
		t.Fatalf("the error does not name the lock: %s", msg)
	}
	quiet := func(phase string, limit int32) {
		t.Helper()
		before := ft.requests.Load()
		time.Sleep(3 * time.Second)
		if n := ft.requests.Load() - before; n > limit {
			t.Fatalf("%s: %d requests in 3s: retrying in a loop", phase, n)
		}
		if c.leads.Load() {
			t.Fatalf("%s: leads without permission", phase)
		}
	}
	quiet("no permissions", 40)

	grant := func(verbs ...string) {
		t.Helper()
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "meshd-election", Namespace: ns},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs},
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			},
		}
		roles := cluster.Client.RbacV1().Roles(ns)
		if _, err := roles.Get(ctx, role.Name, metav1.GetOptions{}); err == nil {
			_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		if _, err := roles.Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = cluster.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "meshd-election", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "meshd-election"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "meshd", Namespace: ns}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	grant("get", "list", "watch")
	testutil.Eventually(t, 10*time.Second, testutil.Check("the candidate to see the dead holder and fail to replace it", func() bool {
		return c.le.Status().Holder == "ghost" && strings.Contains(c.lastError(), "update ConfigMap")
	}))
	quiet("read-only, holder dead", 15)

	grant("get", "list", "watch", "create", "update")
	granted := time.Now()
	testutil.Eventually(t, bound+2*time.Second, testutil.Check("the candidate to lead once granted", c.leads.Load))
	t.Logf("led %v after the grant", time.Since(granted).Round(time.Millisecond))
}

// TestServerErrorsMoveLeadershipWithoutOverlap: the API server answers one
// candidate with 500s, later the other with 429s (Retry-After: 1, which
// client-go honours by retrying). Each time the troubled leader steps down
// within its renew deadline and the other takes over after the lease, with
// no overlap and without a storm of retries.
func TestServerErrorsMoveLeadershipWithoutOverlap(t *testing.T) {
	ns := newNamespace(t, "errors")
	l := &ledger.Ledger{}
	clientA, faultsA := faultyClient(t, cluster.Config)
	a := startCandidate(t, "a", l)(election.NewLeaderElection(ns, "a", election.IngressController, "stable", clientA, electionOptions(t)...))
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads.Load))
	clientB, faultsB := faultyClient(t, cluster.Config)
	b := startCandidate(t, "b", l)(election.NewLeaderElection(ns, "b", election.IngressController, "stable", clientB, electionOptions(t)...))
	testutil.Consistently(t, ttl, testutil.Check("a leading alone", func() bool { return a.leads.Load() && !b.leads.Load() }))

	for _, step := range []struct {
		status          int
		sick, other     *candidate
		faults          *faultyTransport
		maxFakedPerSec  float64
		wantErrorSubstr string
	}{
		{http.StatusInternalServerError, a, b, faultsA, 6, "injected by the test"},
		{http.StatusTooManyRequests, b, a, faultsB, 6, ""},
	} {
		step.faults.faked.Store(0)
		step.faults.status.Store(int32(step.status))
		injected := time.Now()
		testutil.Eventually(t, ttl, testutil.Check(fmt.Sprintf("%s to step down after %d answers", step.sick.name, step.status), func() bool { return !step.sick.leads.Load() }))
		testutil.Eventually(t, bound, testutil.Check(fmt.Sprintf("%s to take over", step.other.name), step.other.leads.Load))
		t.Logf("%d on %s: %s leads after %v", step.status, step.sick.name, step.other.name, time.Since(injected).Round(time.Millisecond))
		time.Sleep(2 * time.Second)
		if step.wantErrorSubstr != "" && !strings.Contains(step.sick.lastError(), step.wantErrorSubstr) {
			t.Errorf("%s's last error %q does not carry the server's message", step.sick.name, step.sick.lastError())
		}
		if rate := float64(step.faults.faked.Load()) / time.Since(injected).Seconds(); rate > step.maxFakedPerSec {
			t.Errorf("%.1f requests per second answered %d: retrying too fast", rate, step.status)
		}
		step.faults.status.Store(0)
		testutil.Consistently(t, ttl, testutil.Check(step.other.name+" keeping the lock after the errors stop", func() bool {
			return step.other.leads.Load() && !step.sick.leads.Load()
		}))
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("overlaps: %+v", o)
	}
}

// TestEmptyDefaultRevisionLabelMeansNoDefault: the default-revision webhook
// exists but its label is empty: no default is known, so the stable
// instance does not take the lock from the canary one until the label
// names it.
func TestEmptyDefaultRevisionLabelMeansNoDefault(t *testing.T) {
	ns := newNamespace(t, "empty-label")
	ctx := context.Background()
	hooks := cluster.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	name := revisions.DefaultWebhookName(ns)
	wh, err := hooks.Create(ctx, &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{revisions.DefaultRevisionLabel: ""}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hooks.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	watcher := func(t *testing.T) election.Option {
		w, err := revisions.NewDefaultWatcher(cluster.Client, revisions.Options{MeshNamespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); w.Run(stop) }()
		t.Cleanup(func() { close(stop); <-done })
		return election.WithDefaultWatcher(w) // run here, not by the election
	}
	l := &ledger.Ledger{}
	canary := startCandidate(t, "canary-1", l)(election.NewLeaderElection(ns, "canary-1", election.NamespaceController, "canary", cluster.Client,
		electionOptions(t, watcher(t))...))
	testutil.Eventually(t, 10*time.Second, testutil.Check("canary to lead", canary.leads.Load))
	stable := startCandidate(t, "stable-1", l)(election.NewLeaderElection(ns, "stable-1", election.NamespaceController, "stable", cluster.Client,
		electionOptions(t, watcher(t))...))
	testutil.Consistently(t, 2*ttl, testutil.Check("canary keeping the lock while the label is empty", func() bool { return canary.leads.Load() && !stable.leads.Load() }))

	wh.Labels[revisions.DefaultRevisionLabel] = "stable"
	if _, err := hooks.Update(ctx, wh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, testutil.Check("stable to take over once it is the default", stable.leads.Load))
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("overlaps: %+v", o)
	}
}

// TestMeshdRejectsBadConfiguration runs the binary with settings that cannot
// work: each exits 1 at once with a message naming the problem.
func TestMeshdRejectsBadConfiguration(t *testing.T) {
	bin := meshdBinary(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ttl", "500ms"}, "invalid setting: --ttl 500ms: must be at least 1s"},
		{[]string{"--namespace", "Mesh_NS"}, `invalid setting: --namespace "Mesh_NS": not a DNS label`},
		{[]string{"--revision", "Canary!"}, `invalid setting: --revision "Canary!": not a DNS label`},
		{[]string{"--identity", "", "--revision", strings.Repeat("r", 64)}, `--revision "rrrr`},
		{[]string{"--kubeconfig", filepath.Join(t.TempDir(), "missing")}, "missing"},
	} {
		args := append([]string{"run", "--kubeconfig", kubeconfig, "--monitoring-address", "127.0.0.1:0"}, tc.args...)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		cancel()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 1 || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "panic") {
			t.Errorf("meshd %q: exit %d (%v), output:\n%s\nwant exit 1 and %q", tc.args, code, err, out, tc.want)
		}
	}
}

// TestMeshdWaitsForItsNamespace starts the daemon for a mesh namespace that
// does not exist: /debug/elections says why nothing leads, and every
// election is led soon after the namespace appears.
func TestMeshdWaitsForItsNamespace(t *testing.T) {
	bin := meshdBinary(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("mesh-later-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_ = cluster.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	logFile, err := os.Create(filepath.Join(dir, "meshd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "run", "--kubeconfig", kubeconfig, "--namespace", ns, "--identity", "early",
		"--ttl", "2s", "--monitoring-address", meshdproc.AnyPort)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	statuses := func() []election.Status {
		addr, ok := meshdproc.MonitoringAddressInFile(logFile.Name(), 0)
		if !ok {
			return nil
		}
		resp, err := http.Get("http://" + addr + "/debug/elections")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var out []election.Status
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	testutil.Eventually(t, 15*time.Second, testutil.Check("every election to report the missing namespace", func() bool {
		sts := statuses()
		for _, s := range sts {
			if s.Leader || !strings.Contains(s.LastError, "not found") {
				return false
			}
		}
		return len(sts) == 3
	}))
	if _, err := cluster.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, bound+2*time.Second, testutil.Check("every election to be led", func() bool {
		sts := statuses()
		for _, s := range sts {
			if !s.Leader {
				return false
			}
		}
		return len(sts) == 3
	}))
	select {
	case err := <-exited:
		b, _ := os.ReadFile(logFile.Name())
		t.Fatalf("meshd exited: %v\n%s", err, b)
	default:
	}
}
