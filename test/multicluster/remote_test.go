package multicluster

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/meshd-io/meshd/internal/controllers/rootcert"
	"github.com/meshd-io/meshd/internal/daemon"
	"github.com/meshd-io/meshd/internal/multicluster"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
)

func createNamespace(t *testing.T, s *site, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.c.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// Primary-remote: west runs no control plane; two replicas in east both
// know it, and exactly one of them leads west's election, with a remote
// key, publishing east's root there. When it crashes the other takes over.
func TestPrimaryRemoteHasExactlyOneLeader(t *testing.T) {
	m := newMesh(t)
	m.linkRemote(m.east, m.west)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := m.sample(ctx)

	a := m.start("meshd-a", m.east)
	b := m.start("meshd-b", m.east)
	var leader string
	deadline := time.Now().Add(10 * time.Second)
	for {
		ls := m.leaders()[m.west.id]
		l := m.lock(m.west)
		if len(ls) == 1 && l.Holder == ls[0] && l.HolderKey == "^default" {
			leader = ls[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("west: leaders %v, lock holder %q key %q; want one remote leader", ls, l.Holder, l.HolderKey)
		}
		time.Sleep(pollEvery)
	}
	m.waitPublished(m.west, m.ns, m.root, 10*time.Second)
	m.waitPublished(m.west, "default", m.root, 10*time.Second)

	// Stays exactly one for a few renewals.
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if ls := m.leaders()[m.west.id]; len(ls) != 1 || ls[0] != leader {
			t.Fatalf("west: leaders %v, want only %s", ls, leader)
		}
	}

	dead, other := a, "meshd-b"
	if leader == "meshd-b" {
		dead, other = b, "meshd-a"
	}
	killed := time.Now()
	m.kill(dead)
	m.waitLeader(m.west, other, "^default", 3*ttl)
	t.Logf("west's lock went from %s to %s %v after the kill", leader, other, time.Since(killed).Round(time.Millisecond))
	cancel()
	wait()
	m.checkNoOverlap()
}

// A cluster Secret added at run time brings the cluster in; removed, the
// cluster's controller stops and its lock is released.
func TestSecretAddedAndRemovedAtRunTime(t *testing.T) {
	m := newMesh(t)
	p := m.start("meshd-east", m.east)
	m.waitLeader(m.east, "meshd-east", "default", 10*time.Second)
	if l := m.lock(m.west); l.Holder != "" {
		t.Fatalf("west's lock is held by %q before any Secret names west", l.Holder)
	}
	if _, err := clusterState(p, "west"); err == nil {
		t.Fatal("/debug/clusters lists west before any Secret names it")
	}

	added := time.Now()
	m.linkRemote(m.east, m.west)
	m.waitLeader(m.west, "meshd-east", "^default", 10*time.Second)
	t.Logf("west joined %v after its Secret was created", time.Since(added).Round(time.Millisecond))
	m.waitPublished(m.west, m.ns, m.root, 10*time.Second)
	if c, err := clusterState(p, "west"); err != nil || c.State != daemon.ClusterRunning || c.Secret != m.ns+"/istio-remote-secret-west" {
		t.Errorf("/debug/clusters: %+v %v, want west running from its Secret", c, err)
	}

	removed := time.Now()
	m.deleteSecret(m.east, "istio-remote-secret-west")
	deadline := time.Now().Add(10 * time.Second)
	for {
		l := m.lock(m.west)
		_, listed := clusterState(p, "west")
		if l.Holder == "" && listed != nil && len(m.leaders()[m.west.id]) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("west still held by %q (listed: %v) 10s after its Secret was deleted", l.Holder, listed == nil)
		}
		time.Sleep(pollEvery)
	}
	took := time.Since(removed)
	t.Logf("west's lock was released %v after its Secret was deleted", took.Round(time.Millisecond))
	if took > ttl {
		t.Errorf("releasing west took %v, want well within the lease (%v): a removed cluster releases, it does not let the lease run out", took, ttl)
	}
	// The local cluster is not disturbed.
	m.waitLeader(m.east, "meshd-east", "default", time.Second)
	m.checkNoOverlap()
}

// A Secret that cannot be used is reported clearly (log, Event, and
// /debug/clusters) and skipped; the other clusters run on, and a broken
// update of a running cluster's kubeconfig keeps the cluster on its
// previous one.
func TestBrokenKubeconfigSecretIsReportedAndSkipped(t *testing.T) {
	m := newMesh(t)
	m.linkRemote(m.east, m.west)
	m.putSecret(m.east, "broken", map[string][]byte{
		"garbage": []byte("{{{ not yaml"),
		"plugin": []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: some-credential-plugin}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`),
		"east": []byte("the local cluster's own key is ignored, whatever it holds"),
	})
	p := m.start("meshd-east", m.east)
	m.waitLeader(m.east, "meshd-east", "default", 10*time.Second)
	m.waitLeader(m.west, "meshd-east", "^default", 10*time.Second)

	for id, want := range map[string][]string{
		"garbage": {"broken", "not a kubeconfig"},
		"plugin":  {"broken", "exec", "credential plugin"},
	} {
		c, err := clusterState(p, id)
		if err != nil {
			t.Fatal(err)
		}
		if c.State != daemon.ClusterInvalid || len(c.Problems) != 1 {
			t.Errorf("%s: %+v, want state %q with one problem", id, c, daemon.ClusterInvalid)
			continue
		}
		if missing := lacks(c.Problems[0], want...); len(missing) > 0 {
			t.Errorf("%s: problem %q lacks %q", id, c.Problems[0], missing)
		}
	}
	if c, err := clusterState(p, "east"); err != nil || c.State != daemon.ClusterLocal {
		t.Errorf("east: %+v %v, want only the local cluster under its ID", c, err)
	}
	if missing := lacks(p.Log(), "skipping a remote cluster", `cluster \"garbage\" from Secret `+m.ns+`/broken`); len(missing) > 0 {
		t.Errorf("the log lacks %q", missing)
	}
	events, err := m.east.c.Client.CoreV1().Events(m.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", daemon.ReasonInvalidRemoteCluster).String()})
	if err != nil {
		t.Fatal(err)
	}
	var onSecret int
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Secret" && e.InvolvedObject.Name == "broken" && e.Type == corev1.EventTypeWarning {
			onSecret++
		}
	}
	if onSecret == 0 {
		t.Errorf("no Warning Event %s on Secret broken (events: %d)", daemon.ReasonInvalidRemoteCluster, len(events.Items))
	}

	// West's Secret turns bad: west keeps running on what it had.
	m.putSecret(m.east, "istio-remote-secret-west", map[string][]byte{"west": []byte("apiVersion: v1\nkind: Config\n")})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := clusterState(p, "west")
		if err == nil && c.State == daemon.ClusterRunning {
			if all, _ := allClusters(p); strings.Contains(all, "still running with the previous kubeconfig") {
				break
			}
		}
		if time.Now().After(deadline) {
			all, _ := allClusters(p)
			t.Fatalf("west after a broken update: %s", all)
		}
		time.Sleep(pollEvery)
	}
	m.waitLeader(m.west, "meshd-east", "^default", time.Second)
	m.waitLeader(m.east, "meshd-east", "default", time.Second)
	if err := p.Healthy(context.Background()); err != nil {
		t.Errorf("/healthz: %v", err)
	}
	m.checkNoOverlap()
}

// allClusters returns p's /debug/clusters as one line of JSON, for
// messages and searches.
func allClusters(p *meshdproc.Process) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var raw []json.RawMessage
	if err := p.GetJSON(ctx, "/debug/clusters", &raw); err != nil {
		return "", err
	}
	b, err := json.Marshal(raw)
	return string(b), err
}

// With an external control plane, meshd joins a remote cluster's election
// only when the remote's mesh namespace names its cluster (or "*") in
// topology.istio.io/controlPlaneClusters, as istiod does.
func TestExternalControlPlaneJoinsOnlyWhereNamed(t *testing.T) {
	m := newMesh(t)
	annotate := func(value string) {
		t.Helper()
		ns, err := m.west.c.Client.CoreV1().Namespaces().Get(context.Background(), m.ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ns.Annotations = map[string]string{multicluster.ControlPlaneClustersAnnotation: value}
		if _, err := m.west.c.Client.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	annotate("north,south")
	m.linkRemote(m.east, m.west)
	p := m.start("meshd-east", m.east, "--external-control-plane")
	m.waitLeader(m.east, "meshd-east", "default", 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := clusterState(p, "west")
		if err == nil && c.State == daemon.ClusterNotJoined {
			if !strings.Contains(c.Reason, `does not name cluster "east"`) {
				t.Errorf("reason %q", c.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("west: %+v %v, want %q", c, err, daemon.ClusterNotJoined)
		}
		time.Sleep(pollEvery)
	}
	if l := m.lock(m.west); l.Holder != "" {
		t.Errorf("west's lock is held by %q, though west names other control planes", l.Holder)
	}

	// The decision is taken when the cluster is added: naming east and
	// renewing the Secret brings west in.
	annotate("north, east")
	m.putSecret(m.east, "istio-remote-secret-west", map[string][]byte{"west": append(m.west.kubeconfig, '\n')})
	m.waitLeader(m.west, "meshd-east", "^default", 10*time.Second)
	if c, err := clusterState(p, "west"); err != nil || c.State != daemon.ClusterRunning {
		t.Errorf("west: %+v %v, want running", c, err)
	}
}

// Where the clusters have different roots, an instance that leads a remote
// cluster publishes nothing there and says why: the remote's workloads
// trust their own root.
func TestDifferentRootsAreNotPublishedIntoTheRemote(t *testing.T) {
	m := newMesh(t)
	westRoot := newRoot(t)
	m.plugRoot(m.west, westRoot)
	m.linkRemote(m.east, m.west)
	p := m.start("meshd-east", m.east)
	m.waitLeader(m.west, "meshd-east", "^default", 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var problem string
		es, err := p.Elections(context.Background())
		for _, e := range es {
			if e.Cluster == "west" && len(e.Problems) > 0 {
				problem = e.Problems[0]
			}
		}
		if err == nil && strings.Contains(problem, "differs") {
			t.Logf("west's election reports: %s", problem)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no problem reported for west: %+v %v", es, err)
		}
		time.Sleep(pollEvery)
	}
	// (Namespaces of west other than the test's own are shared with other
	// tests, which publish their roots there.)
	app := "app-" + m.ns[len(m.ns)-8:]
	createNamespace(t, m.west, app)
	time.Sleep(time.Second)
	for _, ns := range []string{m.ns, app} {
		if got := m.published(m.west, ns); got != "" {
			t.Errorf("west namespace %s holds a root (its own root: %v)", ns, got == westRoot)
		}
	}
	// The local cluster is served as always, and the instance stays ready.
	m.waitPublished(m.east, m.ns, m.root, 10*time.Second)
	if err := p.Ready(context.Background()); err != nil {
		t.Errorf("/readyz: %v", err)
	}
}

// SIGTERM releases the locks of every cluster, not only the local one.
func TestSigtermReleasesEveryClusterLock(t *testing.T) {
	m := newMesh(t)
	m.linkRemote(m.east, m.west)
	p := m.start("meshd-east", m.east)
	m.waitLeader(m.east, "meshd-east", "default", 10*time.Second)
	m.waitLeader(m.west, "meshd-east", "^default", 10*time.Second)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ttl); err != nil {
		t.Fatalf("after SIGTERM: %v, want exit status 0", err)
	}
	for _, s := range []*site{m.east, m.west} {
		if l := m.lock(s); l.Holder != "" {
			t.Errorf("%s: lock still names %q after a graceful stop", s.id, l.Holder)
		}
	}
}

// With --cluster-trust-bundle the root goes into the ClusterTrustBundle of
// every cluster instead of a ConfigMap per namespace, as istiod does with
// ENABLE_CLUSTER_TRUST_BUNDLE_API. (The bundle is cluster-scoped: the
// test owns it only while it runs.)
func TestClusterTrustBundleInEveryCluster(t *testing.T) {
	m := newMesh(t)
	m.linkRemote(m.east, m.west)
	m.start("meshd-east", m.east, "--cluster-trust-bundle")
	m.waitLeader(m.east, "meshd-east", "default", 10*time.Second)
	m.waitLeader(m.west, "meshd-east", "^default", 10*time.Second)
	for _, s := range []*site{m.east, m.west} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := s.c.Client.CertificatesV1beta1().ClusterTrustBundles().Get(context.Background(), rootcert.ClusterTrustBundleName, metav1.GetOptions{})
			if err == nil && b.Spec.TrustBundle == m.root && b.Spec.SignerName == rootcert.ClusterTrustBundleSigner {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no ClusterTrustBundle with the mesh root within 10s (err %v)", s.id, err)
			}
			time.Sleep(pollEvery)
		}
		if got := m.published(s, m.ns); got != "" {
			t.Errorf("%s: %s written beside the ClusterTrustBundle", s.id, rootcert.TargetConfigMap)
		}
	}
}
