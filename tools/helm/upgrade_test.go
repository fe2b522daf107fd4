package helm

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
)

// upgradeTTL is the lease of the releases in the upgrade test. A job that
// waited for a lease to run out would stop for about this long; a handover
// takes milliseconds.
const upgradeTTL = 4 * time.Second

// The upgrade of docs/operations.md, on the real API server: a release of
// revision stable runs; a release of revision canary is installed beside
// it; the default revision moves to canary; the stable release is
// uninstalled. Every instance records each term of work in a ledger
// (monotonic clock, one machine): no job ever runs in two instances at
// once, and no job that goes on stops for as long as half a lease between
// two terms, so every move was a handover, not a wait for a lease to run
// out.
func TestUpgradeToANewRevision(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	app := c.NewNamespace(t)
	ctx := context.Background()
	root := createCA(t, c, ns)
	webhook := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name: "istio-revision-tag-default-" + ns, Labels: map[string]string{"istio.io/rev": "stable"}}}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, webhook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, webhook.Name, metav1.DeleteOptions{})
	})
	meshd := buildMeshd(t)
	logDir, ledgerDir := t.TempDir(), t.TempDir()
	var ledgers []string
	// start runs a release's Pods as meshd processes with its
	// ServiceAccount, each with a ledger of its own.
	start := func(r release) []*meshdproc.Process {
		kubeconfig := serviceAccountKubeconfig(t, c, ns, r.sa.Name)
		var procs []*meshdproc.Process
		for _, pod := range r.createPods(t, c) {
			path := filepath.Join(ledgerDir, pod.Name+".jsonl")
			ledgers = append(ledgers, path)
			withLedger := r
			withLedger.deployment = r.deployment.DeepCopy()
			ctr := &withLedger.deployment.Spec.Template.Spec.Containers[0]
			ctr.Args = append(ctr.Args, "--ledger-file="+path)
			procs = append(procs, startAsPod(t, meshd, withLedger, pod, ns, kubeconfig, logDir))
		}
		for _, p := range procs {
			waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := p.WaitReady(waitCtx)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v\n%s", p.Name(), err, p.LogTail(30))
			}
		}
		return procs
	}
	values := map[string]any{"ttlSeconds": int(upgradeTTL / time.Second)}

	// 1. stable alone.
	stable := installValues(t, c, ns, "stable", values)
	stableProcs := start(stable)
	eventually(t, 30*time.Second, func() error {
		return checkLeaders(ctx, stableProcs, map[string]string{"istio-namespace-controller-election": "stable",
			"meshd-status-leader": "stable", "meshd-revision-stable": "stable"})
	})

	// 2. canary beside it: it leads its own revision's election only.
	canary := installValues(t, c, ns, "canary", values)
	canaryProcs := start(canary)
	all := append(append([]*meshdproc.Process(nil), stableProcs...), canaryProcs...)
	eventually(t, 30*time.Second, func() error {
		return checkLeaders(ctx, all, map[string]string{"istio-namespace-controller-election": "stable",
			"meshd-status-leader": "stable", "meshd-revision-stable": "stable", "meshd-revision-canary": "canary"})
	})

	// 3. The default moves to canary: the prioritized elections follow.
	got, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhook.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Labels["istio.io/rev"] = "canary"
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		return checkLeaders(ctx, all, map[string]string{"istio-namespace-controller-election": "canary",
			"meshd-status-leader": "canary", "meshd-revision-stable": "stable", "meshd-revision-canary": "canary"})
	})

	// 4. stable is uninstalled: its instances stop as their Pods would.
	for _, p := range stableProcs {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("%s: %v", p.Name(), err)
		}
	}
	uninstall(t, c, ns, stable)
	eventually(t, 30*time.Second, func() error {
		return checkLeaders(ctx, canaryProcs, map[string]string{"istio-namespace-controller-election": "canary",
			"meshd-status-leader": "canary", "meshd-revision-canary": "canary"})
	})
	// The jobs still get done: a new namespace gets the root.
	fresh := c.NewNamespace(t)
	eventually(t, 30*time.Second, func() error {
		for _, n := range []string{app, fresh} {
			cm, err := c.Client.CoreV1().ConfigMaps(n).Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["root-cert.pem"] != root {
				return fmt.Errorf("%s/istio-ca-root-cert is not the mesh root", n)
			}
		}
		return nil
	})
	for _, p := range canaryProcs {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("%s: %v", p.Name(), err)
		}
	}
	for _, p := range all {
		for _, line := range strings.Split(p.Log(), "\n") {
			if permissionError.MatchString(line) {
				t.Errorf("%s: permission error: %s", p.Name(), line)
			}
		}
	}

	l, err := ledger.ReadFiles(ledgers...)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range l.Overlaps() {
		t.Errorf("%s ran in %s and %s at once for %v", o.Election, o.A, o.B, o.Duration)
	}
	moved := map[string]int{}
	for election, gaps := range gapsBetweenTerms(l.Intervals()) {
		for _, g := range gaps {
			t.Logf("%s: %s -> %s after %v", election, g.from, g.to, g.gap)
			if g.from != g.to {
				moved[election]++
			}
			if g.gap >= upgradeTTL/2 {
				t.Errorf("%s stopped for %v between %s and %s: longer than a handover", election, g.gap, g.from, g.to)
			}
		}
	}
	// The prioritized jobs moved from a stable to a canary instance at
	// least once; had they not, there would be nothing to measure.
	for _, e := range []string{"istio-namespace-controller-election", "meshd-status-leader"} {
		if moved[e] == 0 {
			t.Errorf("%s never moved between instances", e)
		}
	}
}

// gap is the time between the end of one term of an election's work and
// the start of the next.
type gap struct {
	from, to string
	gap      time.Duration
}

// gapsBetweenTerms returns, per election, the pauses between consecutive
// terms: from the latest stop so far to the next start (0 when they
// touch; overlaps are reported elsewhere). The end of the last term is no
// gap: nothing follows it.
func gapsBetweenTerms(ivs []ledger.Interval) map[string][]gap {
	by := map[string][]ledger.Interval{}
	for _, iv := range ivs {
		by[iv.Election] = append(by[iv.Election], iv)
	}
	out := map[string][]gap{}
	for election, terms := range by {
		sort.Slice(terms, func(i, j int) bool { return terms[i].Start.Before(terms[j].Start) })
		end, holder := terms[0].Stop, terms[0].Holder
		for _, next := range terms[1:] {
			d := max(next.Start.Sub(end), 0)
			out[election] = append(out[election], gap{from: holder, to: next.Holder, gap: d})
			if next.Stop.After(end) {
				end, holder = next.Stop, next.Holder
			}
		}
	}
	return out
}

// uninstall deletes what install created for r, as "helm uninstall" does.
func uninstall(t *testing.T, c *testcluster.Cluster, ns string, r release) {
	t.Helper()
	ctx := context.Background()
	name := r.deployment.Name
	errs := []error{
		c.Client.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{}),
		c.Client.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, r.pdb.Name, metav1.DeleteOptions{}),
		c.Client.RbacV1().RoleBindings(ns).Delete(ctx, name, metav1.DeleteOptions{}),
		c.Client.RbacV1().Roles(ns).Delete(ctx, name, metav1.DeleteOptions{}),
		c.Client.CoreV1().ServiceAccounts(ns).Delete(ctx, r.sa.Name, metav1.DeleteOptions{}),
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "meshd.io/revision=" + r.revision})
	errs = append(errs, err)
	if err == nil {
		for _, p := range pods.Items {
			errs = append(errs, c.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
		}
	}
	if err := errlist.Join(errs...); err != nil {
		t.Fatalf("uninstall %s: %v", name, err)
	}
}
