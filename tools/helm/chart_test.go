package helm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/tools/helm/render"
)

var (
	repoRoot = mustRepoRoot()
	chartDir = filepath.Join(repoRoot, "deploy", "charts", "meshd")
)

func TestMain(m *testing.M) { testcluster.Main(m) }

func mustRepoRoot() string {
	wd, err := os.Getwd()
	if err == nil {
		wd, err = testcluster.RepoRoot(wd)
	}
	if err != nil {
		panic(err)
	}
	return wd
}

// buildMeshd builds meshd from the repository, with the race detector.
func buildMeshd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "meshd")
	build := exec.Command("go", "build", "-race", "-o", bin, "./cmd/meshd")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build meshd: %v\n%s", err, out)
	}
	return bin
}

// deploy/meshd.yaml is the chart rendered with its defaults, as "make
// chart" writes it: never a second source that drifts.
func TestRenderedManifestIsCurrent(t *testing.T) {
	want, err := render.Render(chartDir, render.Release{Name: "meshd", Namespace: "istio-system"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "meshd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, body, ok := bytes.Cut(got, []byte("\n---\n")); !ok || !bytes.Equal(append([]byte("---\n"), body...), want) {
		t.Fatal("deploy/meshd.yaml is not the chart's current rendering: run make chart")
	}
}

// objects decodes a rendering into typed objects.
func objects(t *testing.T, manifest []byte) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode: %v\n%s", err, doc)
		}
		out = append(out, obj)
	}
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "---" && !strings.HasPrefix(l, "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.Bytes()
}

// release is one revision's rendered chart, applied to the cluster.
type release struct {
	revision   string
	sa         *corev1.ServiceAccount
	deployment *appsv1.Deployment
	pdb        *policyv1.PodDisruptionBudget
}

// install renders the chart for revision in ns and creates every object,
// as "helm install" would. Cluster-scoped objects are deleted at the end.
func install(t *testing.T, c *testcluster.Cluster, ns, revision, mode string) release {
	t.Helper()
	return installValues(t, c, ns, revision, map[string]any{"ttlSeconds": 4, "electionMode": mode})
}

// installValues is install with the chart values given (revision set from
// revision).
func installValues(t *testing.T, c *testcluster.Cluster, ns, revision string, values map[string]any) release {
	t.Helper()
	vals := map[string]any{"revision": revision}
	for k, v := range values {
		vals[k] = v
	}
	manifest, err := render.Render(chartDir, render.Release{Name: "meshd-" + revision, Namespace: ns, Values: vals})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rel := release{revision: revision}
	for _, obj := range objects(t, manifest) {
		var err error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			rel.sa = o
			_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.Client.RbacV1().Roles(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = c.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = c.Client.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.ClusterRoleBinding:
			_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = c.Client.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{}) })
		case *appsv1.Deployment:
			rel.deployment = o
			_, err = c.Client.AppsV1().Deployments(ns).Create(ctx, o, metav1.CreateOptions{})
		case *policyv1.PodDisruptionBudget:
			rel.pdb = o
			_, err = c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("the chart renders an unexpected %T", obj)
		}
		if err != nil {
			t.Fatalf("apply %T: %v", obj, err)
		}
	}
	if rel.sa == nil || rel.deployment == nil || rel.pdb == nil {
		t.Fatalf("revision %s: the chart lacks a ServiceAccount, Deployment or PodDisruptionBudget", revision)
	}
	return rel
}

// createPods creates the Deployment's replicas from its Pod template, as
// its ReplicaSet would (no controller manager runs here), and returns
// them as created.
func (r release) createPods(t *testing.T, c *testcluster.Cluster) []*corev1.Pod {
	t.Helper()
	var created []*corev1.Pod
	for i := range int(*r.deployment.Spec.Replicas) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", r.deployment.Name, i), Namespace: r.deployment.Namespace,
				Labels: r.deployment.Spec.Template.Labels, Annotations: r.deployment.Spec.Template.Annotations},
			Spec: r.deployment.Spec.Template.Spec,
		}
		got, err := c.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, got)
	}
	return created
}

func podNames(pods []*corev1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return names
}

// permissionError matches what the API server says when RBAC refuses.
var permissionError = regexp.MustCompile(`(?i)forbidden|cannot (get|list|watch|create|update|patch)`)

// Two revisions installed side by side from the chart: each Deployment and
// budget selects only its own Pods, and meshd, run as each Pod would run it
// (the container's arguments and environment, the release's ServiceAccount
// token), does every job without a single permission error.
func TestTwoRevisionsFromTheChart(t *testing.T) {
	runTwoRevisions(t, testcluster.Get(t), "racing")
}

// coordinatedAPIServerFlags serve LeaseCandidates (coordinated leader
// election, beta and off by default).
var coordinatedAPIServerFlags = []string{
	"--feature-gates=CoordinatedLeaderElection=true",
	"--runtime-config=coordination.k8s.io/v1beta1=true",
}

// The same with electionMode coordinated, on an API server that serves
// LeaseCandidates: the chart's RBAC lets every instance publish its
// candidates and the coordinator decide, and "meshd status" shows them.
func TestTwoRevisionsFromTheChartCoordinated(t *testing.T) {
	c, err := testcluster.Start(testcluster.Options{APIServerFlags: coordinatedAPIServerFlags})
	if err != nil {
		t.Fatalf("start a control plane with LeaseCandidates: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	runTwoRevisions(t, c, "coordinated")
}

// runTwoRevisions installs the stable and canary releases in mode and runs
// two instances of each with their release's permissions.
func runTwoRevisions(t *testing.T, c *testcluster.Cluster, mode string) {
	ns := c.NewNamespace(t)
	app := c.NewNamespace(t)
	ctx := context.Background()
	root := createCA(t, c, ns)
	// The default revision, in the webhook the chart lets meshd read.
	webhook := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name: "istio-revision-tag-default-" + ns, Labels: map[string]string{"istio.io/rev": "stable"}}}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, webhook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, webhook.Name, metav1.DeleteOptions{})
	})

	stable, canary := install(t, c, ns, "stable", mode), install(t, c, ns, "canary", mode)
	pods := map[string][]*corev1.Pod{"stable": stable.createPods(t, c), "canary": canary.createPods(t, c)}
	for _, r := range []release{stable, canary} {
		for what, sel := range map[string]*metav1.LabelSelector{"Deployment": r.deployment.Spec.Selector, "PodDisruptionBudget": r.pdb.Spec.Selector} {
			selector, err := metav1.LabelSelectorAsSelector(sel)
			if err != nil {
				t.Fatal(err)
			}
			list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range list.Items {
				got = append(got, p.Name)
			}
			if want := podNames(pods[r.revision]); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("%s %s selects %v, want only its own Pods %v", r.revision, what, got, want)
			}
		}
	}

	meshd := buildMeshd(t)
	logDir := t.TempDir()
	var procs []*meshdproc.Process
	kubeconfigs := map[string]string{}
	for _, r := range []release{stable, canary} {
		kubeconfig := serviceAccountKubeconfig(t, c, ns, r.sa.Name)
		kubeconfigs[r.revision] = kubeconfig
		for _, pod := range pods[r.revision] {
			procs = append(procs, startAsPod(t, meshd, r, pod, ns, kubeconfig, logDir))
		}
	}
	for _, p := range procs {
		waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := p.WaitReady(waitCtx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", p.Name(), err, p.LogTail(30))
		}
	}

	// Every job is done with the chart's permissions.
	exists := func(ns, name string) error {
		_, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	}
	eventually(t, 30*time.Second, func() error {
		cm, err := c.Client.CoreV1().ConfigMaps(app).Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["root-cert.pem"] != root {
			return errors.New("istio-ca-root-cert is not the cacerts root")
		}
		return errlist.Join(exists(ns, "meshd-status"), exists(ns, "meshd-revision-stable"), exists(ns, "meshd-revision-canary"))
	})
	// One leader per election, of the right revision: the default (stable)
	// for the prioritized ones, each revision for its own.
	want := map[string]string{"istio-namespace-controller-election": "stable", "meshd-status-leader": "stable",
		"meshd-revision-stable": "stable", "meshd-revision-canary": "canary"}
	eventually(t, 30*time.Second, func() error { return checkLeaders(ctx, procs, want) })
	if mode == "coordinated" {
		checkCoordinated(t, c, ns, meshd, kubeconfigs["stable"], append(pods["stable"], pods["canary"]...))
	}

	for _, p := range procs {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("%s: %v", p.Name(), err)
		}
	}
	for _, p := range procs {
		for _, line := range strings.Split(p.Log(), "\n") {
			if permissionError.MatchString(line) {
				t.Errorf("%s: permission error: %s", p.Name(), line)
			}
		}
	}
}

// startAsPod runs meshd the way the release's container runs it: the image
// entrypoint "meshd run" with the container's arguments, POD_NAME,
// POD_NAMESPACE and POD_UID from the Pod through the chart's downward API
// references, the other environment as rendered.
func startAsPod(t *testing.T, meshd string, r release, pod *corev1.Pod, ns, kubeconfig, logDir string) *meshdproc.Process {
	t.Helper()
	ctr := r.deployment.Spec.Template.Spec.Containers[0]
	// The downward API fields the chart may use, as the kubelet fills them.
	fromPod := map[string]string{"metadata.name": pod.Name, "metadata.namespace": ns, "metadata.uid": string(pod.UID)}
	env := []string{"GORACE=atexit_sleep_ms=0"}
	for _, e := range ctr.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
			continue
		}
		var v string
		var ok bool
		if f := e.ValueFrom.FieldRef; f != nil {
			v, ok = fromPod[f.FieldPath]
		}
		if !ok {
			t.Fatalf("env %s: unexpected source %+v", e.Name, e.ValueFrom)
		}
		env = append(env, e.Name+"="+v)
	}
	var args []string
	for _, a := range ctr.Args {
		if !strings.HasPrefix(a, "--monitoring-address=") { // a port of its own on loopback
			args = append(args, a)
		}
	}
	p, err := meshdproc.Start(meshdproc.Options{Binary: meshd, Name: pod.Name, Kubeconfig: kubeconfig, Namespace: ns,
		NoIdentity: true, LogDir: logDir, Env: env, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	return p
}

// checkLeaders returns nil when every election in want has exactly one
// leader among procs, of the wanted revision, holding it under its Pod name.
func checkLeaders(ctx context.Context, procs []*meshdproc.Process, want map[string]string) error {
	leaders := map[string][]string{}
	for _, p := range procs {
		els, err := p.Elections(ctx)
		if err != nil {
			return err
		}
		for _, e := range els {
			if e.Identity != p.Name() {
				return fmt.Errorf("%s contends as %q, not its Pod name", p.Name(), e.Identity)
			}
			if e.Leader {
				leaders[e.Name] = append(leaders[e.Name], p.Name())
			}
		}
	}
	for name, rev := range want {
		l := leaders[name]
		if len(l) != 1 || !strings.HasPrefix(l[0], "meshd-"+rev+"-") {
			return fmt.Errorf("%s led by %v, want one Pod of revision %s", name, l, rev)
		}
	}
	return nil
}

// serviceAccountKubeconfig writes a kubeconfig holding a token of the
// ServiceAccount ns/name.
func serviceAccountKubeconfig(t *testing.T, c *testcluster.Cluster, ns, name string) string {
	t.Helper()
	cfg, err := c.ServiceAccountConfig(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfig(rest.CopyConfig(cfg)); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// createCA creates the Secret cacerts in ns with a fresh root and returns it.
func createCA(t *testing.T, c *testcluster.Cluster, ns string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chart test root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	root := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	_, err = c.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cacerts"}, Data: map[string][]byte{"root-cert.pem": []byte(root)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not true within %v: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkCoordinated checks, while the instances run, that every one
// publishes a LeaseCandidate owned by its Pod for meshd-status-leader, that
// the Lease carries meshd's strategy and a stable candidate holds it, and
// that "meshd status", run with a release's ServiceAccount as "kubectl exec"
// would run it, ranks the candidates with the two stable ones first.
func checkCoordinated(t *testing.T, c *testcluster.Cluster, ns, meshd, kubeconfig string, pods []*corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	const lease = "meshd-status-leader"
	eventually(t, 30*time.Second, func() error {
		list, err := c.Client.CoordinationV1beta1().LeaseCandidates(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		owners := map[string]string{}
		for _, lc := range list.Items {
			if lc.Spec.LeaseName == lease && len(lc.OwnerReferences) == 1 && lc.OwnerReferences[0].Kind == "Pod" {
				owners[lc.OwnerReferences[0].Name] = string(lc.OwnerReferences[0].UID)
			}
		}
		for _, p := range pods {
			if owners[p.Name] != string(p.UID) {
				return fmt.Errorf("no candidate of %s owned by Pod %s (uid %s): %v", lease, p.Name, p.UID, owners)
			}
		}
		l, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.Strategy == nil || *l.Spec.Strategy != "meshd.io/prioritized" {
			return fmt.Errorf("lease %s strategy %v", lease, l.Spec.Strategy)
		}
		return nil
	})

	out, err := exec.Command(meshd, "status", "--kubeconfig", kubeconfig, "-n", ns).CombinedOutput()
	if err != nil {
		t.Fatalf("meshd status: %v\n%s", err, out)
	}
	text := string(out)
	if permissionError.MatchString(text) || strings.Contains(text, "warning:") {
		t.Errorf("meshd status with the release's ServiceAccount:\n%s", text)
	}
	head := "Candidates of Lease " + lease + " (strategy meshd.io/prioritized, "
	i := strings.Index(text, head)
	if i < 0 {
		t.Fatalf("meshd status shows no candidates of %s:\n%s", lease, text)
	}
	section := strings.Split(strings.TrimSpace(text[i:]), "\n\n")[0]
	lines := strings.Split(section, "\n")
	if len(lines) != 2+len(pods) {
		t.Fatalf("candidates of %s:\n%s", lease, section)
	}
	holders := 0
	for rank, line := range lines[2:] {
		f := strings.Fields(line)
		rev := "stable"
		if rank >= 2 {
			rev = "canary"
		}
		// RANK CANDIDATE IDENTITY REVISION REMOTE VERSION HEARTBEAT(2 fields) LIVE ROLE
		if len(f) != 10 || f[0] != fmt.Sprint(rank+1) || !strings.HasPrefix(f[2], "meshd-"+rev+"-") || f[3] != rev || f[8] != "true" {
			t.Errorf("rank %d: %q", rank+1, line)
		}
		if f[9] == "holder" {
			holders++
			if rev != "stable" {
				t.Errorf("a %s candidate holds %s: %q", rev, lease, line)
			}
		}
	}
	if holders != 1 {
		t.Errorf("%d holders among the candidates:\n%s", holders, section)
	}
}
