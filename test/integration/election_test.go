package integration

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func TestOneLeaderAmongThreeAndFailoverOnStop(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	var ins []*instance
	for _, name := range []string{"a", "b", "c"} {
		le, err := election.NewLeaderElection(ns, name, election.IngressController, "stable", c.Client, opts(t)...)
		ins = append(ins, newInstance(t, name, le, err))
	}
	testutil.Eventually(t, 10*time.Second, testutil.Check("a leader", func() bool { return len(leaders(ins...)) == 1 }))
	testutil.Consistently(t, 2*ttl, testutil.Check("exactly one leader", func() bool { return len(leaders(ins...)) == 1 }))

	first := leaders(ins...)[0]
	rec, _ := configMapRecord(t, c.Client, ns, election.IngressController)
	if rec.HolderIdentity != first || rec.HolderKey != "stable" {
		t.Fatalf("record %+v does not name leader %s", rec, first)
	}
	var rest []*instance
	for _, in := range ins {
		if in.name == first {
			in.stop()
		} else {
			rest = append(rest, in)
		}
	}
	testutil.Eventually(t, 10*time.Second, testutil.Check("a new leader", func() bool { return len(leaders(rest...)) == 1 }))
	testutil.Consistently(t, ttl, testutil.Check("exactly one leader", func() bool { return len(leaders(rest...)) == 1 }))
}

func TestDefaultRevisionStealsAndFollowsTheWebhookLabel(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	le, err := election.NewLeaderElection(ns, "canary-1", election.NamespaceController, "canary", c.Client, opts(t)...)
	canary := newInstance(t, "canary-1", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("canary to lead", canary.leads))

	le, err = election.NewLeaderElection(ns, "stable-1", election.NamespaceController, "stable", c.Client, opts(t)...)
	stable := newInstance(t, "stable-1", le, err)
	testutil.Consistently(t, ttl, testutil.Check("canary leading while no default is known", func() bool { return canary.leads() && !stable.leads() }))

	setDefaultRevision(t, c.Client, ns, "stable")
	testutil.Eventually(t, 10*time.Second, testutil.Check("stable to take over", func() bool { return stable.leads() && !canary.leads() }))
	rec, _ := configMapRecord(t, c.Client, ns, election.NamespaceController)
	if rec.HolderIdentity != "stable-1" || rec.HolderKey != "stable" {
		t.Fatalf("after steal record = %+v", rec)
	}
	testutil.Consistently(t, ttl, testutil.Check("stable keeps the lock", func() bool { return stable.leads() && !canary.leads() }))

	setDefaultRevision(t, c.Client, ns, "canary")
	testutil.Eventually(t, 10*time.Second, testutil.Check("canary to take it back", func() bool { return canary.leads() && !stable.leads() }))
	rec, _ = configMapRecord(t, c.Client, ns, election.NamespaceController)
	if rec.HolderIdentity != "canary-1" || rec.LeaderTransitions != 2 {
		t.Fatalf("after flip back record = %+v, want canary-1 with 2 transitions", rec)
	}
}

func TestLocalStealsFromRemoteButNotTheOtherWay(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	le, err := election.NewLeaderElectionMulticluster(ns, "remote-1", election.NamespaceController, "stable", true, c.Client, opts(t)...)
	remote := newInstance(t, "remote-1", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("remote to lead", remote.leads))
	if rec, _ := configMapRecord(t, c.Client, ns, election.NamespaceController); rec.HolderKey != "^stable" {
		t.Fatalf("remote key = %q, want ^stable", rec.HolderKey)
	}

	le, err = election.NewLeaderElectionMulticluster(ns, "local-1", election.NamespaceController, "stable", false, c.Client, opts(t)...)
	local := newInstance(t, "local-1", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("local to take over", func() bool { return local.leads() && !remote.leads() }))

	le, err = election.NewLeaderElectionMulticluster(ns, "remote-2", election.NamespaceController, "stable", true, c.Client, opts(t)...)
	remote2 := newInstance(t, "remote-2", le, err)
	testutil.Consistently(t, 2*ttl, testutil.Check("local keeps the lock against remotes", func() bool {
		return local.leads() && !remote.leads() && !remote2.leads()
	}))
}

func TestPerRevisionElectionsAreIndependent(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	setDefaultRevision(t, c.Client, ns, "stable")
	byRev := map[string][]*instance{}
	for _, spec := range []struct{ name, rev string }{{"s1", "stable"}, {"s2", "stable"}, {"c1", "canary"}, {"c2", "canary"}} {
		le, err := election.NewPerRevisionLeaderElection(ns, spec.name, election.GatewayDeploymentController, spec.rev, c.Client, opts(t)...)
		byRev[spec.rev] = append(byRev[spec.rev], newInstance(t, spec.name, le, err))
	}
	oneEach := func() bool { return len(leaders(byRev["stable"]...)) == 1 && len(leaders(byRev["canary"]...)) == 1 }
	testutil.Eventually(t, 10*time.Second, testutil.Check("one leader per revision", oneEach))
	testutil.Consistently(t, 2*ttl, testutil.Check("one leader per revision, no preemption", oneEach))
	for rev, ins := range byRev {
		lease, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), election.GatewayDeploymentController+"-"+rev, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := *lease.Spec.HolderIdentity, leaders(ins...)[0]; got != want {
			t.Fatalf("lease for %s held by %q, but %q leads", rev, got, want)
		}
	}
}

func TestPrioritizedLeaseElectionUsesKeyAnnotation(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	le, err := election.NewLeaseLeaderElection(ns, "canary-1", election.StatusController, "canary", c.Client, opts(t)...)
	canary := newInstance(t, "canary-1", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("canary to lead", canary.leads))
	lease, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), election.StatusController, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lease.Annotations[resourcelock.LeaseHolderKeyAnnotation]; got != "canary" {
		t.Fatalf("holder-key annotation = %q", got)
	}
	setDefaultRevision(t, c.Client, ns, "stable")
	le, err = election.NewLeaseLeaderElection(ns, "stable-1", election.StatusController, "stable", c.Client, opts(t)...)
	stable := newInstance(t, "stable-1", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("stable to take the lease", func() bool { return stable.leads() && !canary.leads() }))
	lease, _ = c.Client.CoordinationV1().Leases(ns).Get(context.Background(), election.StatusController, metav1.GetOptions{})
	if *lease.Spec.HolderIdentity != "stable-1" || lease.Annotations[resourcelock.LeaseHolderKeyAnnotation] != "stable" {
		t.Fatalf("lease after steal: holder %q key %q", *lease.Spec.HolderIdentity, lease.Annotations[resourcelock.LeaseHolderKeyAnnotation])
	}
}

func TestGracefulReleaseHandsOver(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	le, err := election.NewLeaderElection(ns, "a", election.IngressController, "stable", c.Client, opts(t)...)
	a := newInstance(t, "a", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
	le, err = election.NewLeaderElection(ns, "b", election.IngressController, "stable", c.Client, opts(t)...)
	b := newInstance(t, "b", le, err)
	testutil.Consistently(t, ttl, testutil.Check("a leading", func() bool { return a.leads() && !b.leads() }))

	a.stop()
	rec, _ := configMapRecord(t, c.Client, ns, election.IngressController)
	if rec.HolderIdentity != "" && rec.HolderIdentity != "b" {
		t.Fatalf("after a's release the record names %q", rec.HolderIdentity)
	}
	testutil.Eventually(t, 10*time.Second, testutil.Check("b to lead after the release", b.leads))
}

func TestCrashedHolderIsReplacedOnlyAfterLeaseDuration(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	// A Lease records renewTime in microseconds, so the test can compare it
	// with the takeover time on this host's clock.
	crashOpts := opts(t, election.WithReleaseOnCancel(false))
	le, err := election.NewPerRevisionLeaderElection(ns, "a", election.GatewayDeploymentController, "stable", c.Client, crashOpts...)
	a := newInstance(t, "a", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
	le, err = election.NewPerRevisionLeaderElection(ns, "b", election.GatewayDeploymentController, "stable", c.Client, opts(t)...)
	b := newInstance(t, "b", le, err)
	testutil.Consistently(t, ttl, testutil.Check("a leading", func() bool { return a.leads() && !b.leads() }))

	a.stop() // no release: as if the process died
	lease, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), election.GatewayDeploymentController+"-stable", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *lease.Spec.HolderIdentity != "a" {
		t.Fatalf("crashed holder's lease names %q", *lease.Spec.HolderIdentity)
	}
	lastRenew := lease.Spec.RenewTime.Time
	testutil.Eventually(t, 10*time.Second, testutil.Check("b to take over", b.leads))
	if gap := b.lastStart().Sub(lastRenew); gap < ttl {
		t.Fatalf("b started %v after a's last renew, before the lease duration %v had passed", gap, ttl)
	}
}

func TestLockKeepsUnrelatedContentAcrossRenewals(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	ctx := context.Background()
	_, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: election.IngressController, Namespace: ns,
			Labels:      map[string]string{"team": "mesh"},
			Annotations: map[string]string{"example.com/owner": "ops"},
		},
		Data: map[string]string{"notes": "do not delete"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	le, err := election.NewLeaderElection(ns, "a", election.IngressController, "stable", c.Client, opts(t)...)
	a := newInstance(t, "a", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
	start, _ := configMapRecord(t, c.Client, ns, election.IngressController)
	// At a 500ms retry period, 4s is about eight renewals.
	testutil.Eventually(t, 10*time.Second, testutil.Check("several renewals", func() bool {
		rec, _ := configMapRecord(t, c.Client, ns, election.IngressController)
		return rec.RenewTime.Sub(start.RenewTime.Time) >= 4*time.Second
	}))
	_, cm := configMapRecord(t, c.Client, ns, election.IngressController)
	if cm.Labels["team"] != "mesh" || cm.Annotations["example.com/owner"] != "ops" || cm.Data["notes"] != "do not delete" {
		t.Fatalf("unrelated content lost: labels %v annotations %v data %v", cm.Labels, cm.Annotations, cm.Data)
	}
	a.stop()
	_, cm = configMapRecord(t, c.Client, ns, election.IngressController)
	if cm.Labels["team"] != "mesh" || cm.Annotations["example.com/owner"] != "ops" || cm.Data["notes"] != "do not delete" {
		t.Fatalf("unrelated content lost on release: labels %v annotations %v data %v", cm.Labels, cm.Annotations, cm.Data)
	}
}

func TestIstiodRecordIsRespectedAndTakenOver(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "records", "valid.json"))
	if err != nil {
		t.Fatal(err)
	}
	istiodRecord := strings.TrimSuffix(string(raw), "\n")
	want, err := resourcelock.DecodeRecord([]byte(istiodRecord))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: election.NamespaceController, Namespace: ns,
			Annotations: map[string]string{resourcelock.LeaderAnnotationKey: istiodRecord},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Same revision as the istiod holder: the lock (30s lease) is respected.
	le, err := election.NewLeaderElection(ns, "meshd-"+want.HolderKey, election.NamespaceController, want.HolderKey, c.Client, opts(t)...)
	same := newInstance(t, "same", le, err)
	testutil.Consistently(t, 2*ttl, testutil.Check("the istiod holder's lock respected", func() bool { return !same.leads() }))
	if got := same.le.Status().Holder; got != want.HolderIdentity {
		t.Fatalf("observed holder %q, want %q", got, want.HolderIdentity)
	}

	// The default revision takes it over.
	setDefaultRevision(t, c.Client, ns, "stable")
	le, err = election.NewLeaderElection(ns, "meshd-stable", election.NamespaceController, "stable", c.Client, opts(t)...)
	def := newInstance(t, "default", le, err)
	// The lock is taken at once; the work starts only when the istiod
	// holder's 30s lease, as observed, has run out (fenced start).
	testutil.Eventually(t, 10*time.Second, testutil.Check("the default revision to take over", func() bool {
		rec, _ := configMapRecord(t, c.Client, ns, election.NamespaceController)
		return rec.HolderIdentity == "meshd-stable"
	}))
	if def.leads() {
		t.Fatal("the default revision's work started while the istiod holder's lease ran")
	}

	_, cm := configMapRecord(t, c.Client, ns, election.NamespaceController)
	written := cm.Annotations[resourcelock.LeaderAnnotationKey]
	got, err := resourcelock.DecodeRecord([]byte(written))
	if err != nil {
		t.Fatalf("meshd's record is not readable by the decoder: %v", err)
	}
	if got.HolderIdentity != "meshd-stable" || got.HolderKey != "stable" || got.LeaderTransitions != want.LeaderTransitions+1 || got.LeaseDurationSeconds != int(ttl/time.Second) {
		t.Fatalf("record after takeover = %+v", got)
	}
	if keys, wantKeys := jsonKeys(written), jsonKeys(istiodRecord); keys != wantKeys {
		t.Fatalf("meshd writes fields %s, istiod %s", keys, wantKeys)
	}
	if !regexp.MustCompile(`"renewTime":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"`).MatchString(written) {
		t.Fatalf("renewTime is not RFC 3339 with second precision: %s", written)
	}
}

// jsonKeys lists the top-level keys of a flat JSON object in order.
func jsonKeys(s string) string {
	var keys []string
	for _, m := range regexp.MustCompile(`"([A-Za-z]+)":`).FindAllStringSubmatch(s, -1) {
		keys = append(keys, m[1])
	}
	return strings.Join(keys, ",")
}

func TestCandidateWithoutUpdatePermissionGetsAClearErrorAndDoesNotLead(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	ctx := context.Background()
	// The service account may read ConfigMaps but not create or update them.
	_, err := c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read-only", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read-only", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-only"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "restricted", Namespace: ns}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ServiceAccountConfig(ctx, ns, "restricted")
	if err != nil {
		t.Fatal(err)
	}
	restricted := kubernetes.NewForConfigOrDie(cfg)
	le, err := election.NewLeaderElection(ns, "restricted-1", election.IngressController, "stable", restricted,
		opts(t, election.WithPrioritized(false))...)
	in := newInstance(t, "restricted-1", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a forbidden error", func() bool {
		return strings.Contains(in.le.Status().LastError, "forbidden")
	}))
	msg := in.le.Status().LastError
	if !strings.Contains(msg, "create ConfigMap "+ns+"/"+election.IngressController) {
		t.Fatalf("error does not say what was attempted on which object: %s", msg)
	}
	testutil.Consistently(t, ttl, testutil.Check("the restricted candidate not leading", func() bool { return !in.leads() }))
}
