package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/meshd-io/meshd/internal/testing/testutil"
)

// deploy/meshd.yaml, the chart rendered with its defaults, assumes this mesh
// namespace and these names.
const (
	deployFile      = "meshd.yaml"
	deployNamespace = "istio-system"
	deployWebhook   = "istio-revision-tag-default"
)

// readManifests decodes every object of deploy/<file> into typed objects.
func readManifests(t *testing.T, file string) []runtime.Object {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", file))
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("deploy/%s: %v", file, err)
		}
		if onlyComments(doc) {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("deploy/%s: %v", file, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

func onlyComments(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return false
		}
	}
	return true
}

// rbacManifests are deploy's ServiceAccount, Role, RoleBinding, ClusterRole
// and ClusterRoleBinding, moved into namespace ns. Cluster-scoped names get
// ns as a suffix, so that tests never share them, and the webhook the
// ClusterRole may read becomes the one for mesh namespace ns.
type rbacManifests struct {
	sa   *corev1.ServiceAccount
	role *rbacv1.Role
	rb   *rbacv1.RoleBinding
	cr   *rbacv1.ClusterRole
	crb  *rbacv1.ClusterRoleBinding
}

func loadRBAC(t *testing.T, ns string) rbacManifests {
	t.Helper()
	var m rbacManifests
	for _, obj := range readManifests(t, deployFile) {
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			m.sa = o
		case *rbacv1.Role:
			m.role = o
		case *rbacv1.RoleBinding:
			m.rb = o
		case *rbacv1.ClusterRole:
			m.cr = o
		case *rbacv1.ClusterRoleBinding:
			m.crb = o
		case *appsv1.Deployment, *policyv1.PodDisruptionBudget:
		default:
			t.Fatalf("unexpected %T in deploy/%s", obj, deployFile)
		}
	}
	if m.sa == nil || m.role == nil || m.rb == nil || m.cr == nil || m.crb == nil {
		t.Fatalf("deploy/ lacks one of ServiceAccount, Role, RoleBinding, ClusterRole, ClusterRoleBinding: %+v", m)
	}
	for _, meta := range []*metav1.ObjectMeta{&m.sa.ObjectMeta, &m.role.ObjectMeta, &m.rb.ObjectMeta} {
		if meta.Namespace != deployNamespace {
			t.Errorf("%s is in namespace %q, want %s", meta.Name, meta.Namespace, deployNamespace)
		}
		meta.Namespace = ns
	}
	for _, s := range append(slices.Clone(m.rb.Subjects), m.crb.Subjects...) {
		if s.Kind != rbacv1.ServiceAccountKind || s.Name != m.sa.Name || s.Namespace != deployNamespace {
			t.Errorf("binding subject %+v, want ServiceAccount %s/%s", s, deployNamespace, m.sa.Name)
		}
	}
	for i := range m.rb.Subjects {
		m.rb.Subjects[i].Namespace = ns
	}
	for i := range m.crb.Subjects {
		m.crb.Subjects[i].Namespace = ns
	}
	if m.rb.RoleRef.Name != m.role.Name || m.crb.RoleRef.Name != m.cr.Name {
		t.Errorf("bindings refer to %q and %q, want %q and %q", m.rb.RoleRef.Name, m.crb.RoleRef.Name, m.role.Name, m.cr.Name)
	}
	m.cr.Name += "-" + ns
	m.crb.Name += "-" + ns
	m.crb.RoleRef.Name = m.cr.Name
	for i, rule := range m.cr.Rules {
		for j, name := range rule.ResourceNames {
			if name == deployWebhook {
				m.cr.Rules[i].ResourceNames[j] = deployWebhook + "-" + ns
			}
		}
	}
	return m
}

// apply creates the objects and deletes the cluster-scoped ones when the
// test ends (the namespace takes the others).
func (r rbacManifests) apply(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := cluster.Client
	ns := r.sa.Namespace
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CoreV1().ServiceAccounts(ns).Create(ctx, r.sa, metav1.CreateOptions{}))
	must(c.RbacV1().Roles(ns).Create(ctx, r.role, metav1.CreateOptions{}))
	must(c.RbacV1().RoleBindings(ns).Create(ctx, r.rb, metav1.CreateOptions{}))
	must(c.RbacV1().ClusterRoles().Create(ctx, r.cr, metav1.CreateOptions{}))
	must(c.RbacV1().ClusterRoleBindings().Create(ctx, r.crb, metav1.CreateOptions{}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.RbacV1().ClusterRoleBindings().Delete(ctx, r.crb.Name, metav1.DeleteOptions{})
		_ = c.RbacV1().ClusterRoles().Delete(ctx, r.cr.Name, metav1.DeleteOptions{})
	})
}

// writeKubeconfig writes a kubeconfig that authenticates with cfg's bearer
// token.
func writeKubeconfig(t *testing.T, cfg *rest.Config, path string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["meshd"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "meshd"}
	kc.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// permissionError matches what the API server says when RBAC refuses.
var permissionError = regexp.MustCompile(`(?i)forbidden|cannot (get|list|watch|create|update|patch)`)

// meshd running with exactly the RBAC in deploy/ leads all its elections,
// runs every controller and never meets a permission error; what the RBAC
// does not grant stays forbidden.
func TestDeployRBACIsEnoughForMeshd(t *testing.T) {
	m := newMesh(t)
	rbac := loadRBAC(t, m.ns)
	rbac.apply(t)
	app := cluster.NewNamespace(t) // a namespace the root certificate must reach
	// The revision deploy/meshd.yaml is rendered for: its RBAC names that
	// revision's objects only.
	m.setDefault("default")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	saConfig, err := cluster.ServiceAccountConfig(ctx, m.ns, rbac.sa.Name)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeKubeconfig(t, saConfig, kubeconfig)

	locks := []string{namespaceLock, statusLock, revisionLock("default")}
	p := m.start("meshd-0", "default", withKubeconfig(kubeconfig))
	m.watchLeaders(locks, in("meshd-0")).wait(t, 15*time.Second)

	// Every controller did its work with these permissions.
	admin := cluster.Client.CoreV1()
	exists := func(ns, name string) func() error {
		return func() error {
			_, err := admin.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	testutil.Eventually(t, 15*time.Second, exists(app, "istio-ca-root-cert")) // namespace: cluster-wide ConfigMaps
	testutil.Eventually(t, 15*time.Second, exists(m.ns, "istio-ca-root-cert"))
	testutil.Eventually(t, 15*time.Second, exists(m.ns, "meshd-status"))           // status: reads every lock
	testutil.Eventually(t, 15*time.Second, exists(m.ns, "meshd-revision-default")) // revision: lists namespaces
	testutil.Eventually(t, 15*time.Second, func() error {                          // leadership Events
		evs, err := admin.Events(m.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Source.Component == "meshd" {
				return nil
			}
		}
		return fmt.Errorf("no Event from meshd among %d in %s", len(evs.Items), m.ns)
	})

	st, err := p.Elections(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if !s.Leader || s.LastError != "" {
			t.Errorf("%s: leader=%v lastError=%q, want leader without errors", s.Name, s.Leader, s.LastError)
		}
	}

	// The service account may not do more than it needs.
	sa := kubernetes.NewForConfigOrDie(saConfig)
	forbidden := map[string]error{
		"delete a ConfigMap": sa.CoreV1().ConfigMaps(m.ns).Delete(ctx, "meshd-status", metav1.DeleteOptions{}),
		"delete a Lease":     sa.CoordinationV1().Leases(m.ns).Delete(ctx, statusLock, metav1.DeleteOptions{}),
		"patch a ConfigMap": func() error {
			_, err := sa.CoreV1().ConfigMaps(m.ns).Patch(ctx, "meshd-status", "application/merge-patch+json",
				[]byte(`{"data":{"x":"y"}}`), metav1.PatchOptions{})
			return err
		}(),
		"list Secrets": func() error {
			_, err := sa.CoreV1().Secrets(m.ns).List(ctx, metav1.ListOptions{})
			return err
		}(),
		"list Leases in another namespace": func() error {
			_, err := sa.CoordinationV1().Leases(app).List(ctx, metav1.ListOptions{})
			return err
		}(),
		"update a Namespace": func() error {
			ns, err := sa.CoreV1().Namespaces().Get(ctx, app, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get (allowed) failed: %w", err)
			}
			_, err = sa.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
			return err
		}(),
		"read another webhook": func() error {
			_, err := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
			return err
		}(),
		"list all webhooks": func() error {
			_, err := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
			return err
		}(),
		"create a webhook": func() error {
			_, err := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
				&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "x-" + m.ns}}, metav1.CreateOptions{})
			return err
		}(),
	}
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want Forbidden", what, err)
		}
	}

	// A clean shutdown, which releases the locks with updates.
	if err := p.Signal(sigterm); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(10 * time.Second); err != nil {
		t.Errorf("meshd-0 after SIGTERM: %v, want exit status 0", err)
	}
	for _, l := range locks {
		if h := m.holder(l); h != "" {
			t.Errorf("%s still names %q after a clean shutdown", l, h)
		}
	}
	for _, line := range strings.Split(p.Log(), "\n") {
		if permissionError.MatchString(line) {
			t.Errorf("permission error in meshd's log: %s", line)
		}
	}
}

// The Deployment is valid for the API server (server-side dry run), runs as
// the ServiceAccount of the RBAC, uses only flags meshd has, and the
// PodDisruptionBudget selects exactly its Pods.
func TestDeployDeploymentManifest(t *testing.T) {
	var (
		dep *appsv1.Deployment
		pdb *policyv1.PodDisruptionBudget
		sa  *corev1.ServiceAccount
	)
	for _, obj := range readManifests(t, deployFile) {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			dep = o
		case *policyv1.PodDisruptionBudget:
			pdb = o
		case *corev1.ServiceAccount:
			sa = o
		}
	}
	if dep == nil || pdb == nil || sa == nil {
		t.Fatalf("deploy/%s lacks a Deployment, PodDisruptionBudget or ServiceAccount", deployFile)
	}
	spec := dep.Spec.Template.Spec
	if spec.ServiceAccountName != sa.Name || dep.Namespace != deployNamespace {
		t.Errorf("Deployment %s/%s runs as %q, want %s/%s", dep.Namespace, dep.Name, spec.ServiceAccountName, deployNamespace, sa.Name)
	}
	if !reflect.DeepEqual(pdb.Spec.Selector, dep.Spec.Selector) {
		t.Errorf("PodDisruptionBudget selects %v, the Deployment %v", pdb.Spec.Selector, dep.Spec.Selector)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(spec.Containers))
	}
	c := spec.Containers[0]
	if !strings.HasPrefix(c.Image, "meshd:") || len(c.Command) != 0 {
		t.Errorf("image %q, command %q: want the meshd image and its entrypoint", c.Image, c.Command)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	for name, field := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"} {
		if e := env[name]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != field {
			t.Errorf("env %s: %+v, want the downward API field %s", name, e, field)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 15014 {
		t.Errorf("ports %+v, want 15014", c.Ports)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != c.Ports[0].Name {
			t.Errorf("probe %+v, want GET %s on port %s", probe, path, c.Ports[0].Name)
		}
	}

	// The image's entrypoint is "meshd run": every argument is one of its
	// flags.
	help, err := runCommand(meshdBinary, "run", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.Args, "--revision=default") {
		t.Errorf("args %q do not set the revision", c.Args)
	}
	for _, a := range c.Args {
		flag, _, _ := strings.Cut(a, "=")
		if !strings.HasPrefix(flag, "--") || !strings.Contains(help, " "+flag+" ") {
			t.Errorf("meshd run has no flag %s", flag)
		}
	}

	// The API server accepts the Deployment and the budget.
	ns := cluster.NewNamespace(t)
	dep.Namespace, pdb.Namespace = ns, ns
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dryRun := []string{metav1.DryRunAll}
	if _, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{DryRun: dryRun}); err != nil {
		t.Errorf("dry-run create of the Deployment: %v", err)
	}
	if _, err := cluster.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{DryRun: dryRun}); err != nil {
		t.Errorf("dry-run create of the PodDisruptionBudget: %v", err)
	}
}

// sigterm is the signal of a graceful stop.
const sigterm = syscall.SIGTERM

// runCommand runs a command and returns its combined output.
func runCommand(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
