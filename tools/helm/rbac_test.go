package helm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/tools/helm/render"
)

// access is one question put to the API server's authorizer about the
// chart's ServiceAccount, and the answer the chart must give.
type access struct {
	namespace string // "" for cluster-scoped or all namespaces
	verb      string
	group     string
	resource  string
	name      string // "" for any object
	allowed   bool
	why       string
}

// meshNS is where deploy/meshd.yaml installs meshd; appNS stands for any
// other namespace of the cluster.
const (
	meshNS = "istio-system"
	appNS  = "bookinfo"
)

// leastPrivilege is the table docs/operations.md shows: what the
// ServiceAccount of deploy/meshd.yaml may and may not do.
var leastPrivilege = []access{
	// ConfigMaps in the mesh namespace.
	{meshNS, "list", "", "configmaps", "", true, "read the locks (status, meshd status)"},
	{meshNS, "update", "", "configmaps", "istio-namespace-controller-election", true, "the namespace controller's lock, shared with istiod"},
	{meshNS, "update", "", "configmaps", "meshd-status", true, "the status controller's output"},
	{meshNS, "update", "", "configmaps", "meshd-revision-default", true, "the revision controller's output, own revision"},
	{meshNS, "create", "", "configmaps", "", true, "create a missing lock or output (RBAC cannot narrow create)"},
	{meshNS, "update", "", "configmaps", "istio", false, "istiod's mesh config"},
	{meshNS, "update", "", "configmaps", "istio-sidecar-injector", false, "istiod's injection template"},
	{meshNS, "patch", "", "configmaps", "istio", false, "istiod's mesh config"},
	{meshNS, "delete", "", "configmaps", "istio-namespace-controller-election", false, "no ConfigMap is ever deleted"},
	{meshNS, "update", "", "configmaps", "istio-leader", false, "istiod's other locks"},
	{meshNS, "update", "", "configmaps", "meshd-revision-canary", false, "another revision's output"},
	// ConfigMaps elsewhere.
	{appNS, "update", "", "configmaps", "istio-ca-root-cert", true, "the root certificate, in every namespace"},
	{appNS, "get", "", "configmaps", "istio-ca-root-cert", true, "the root certificate, in every namespace"},
	{"", "list", "", "configmaps", "istio-ca-root-cert", true, "informer on metadata.name=istio-ca-root-cert"},
	{"", "watch", "", "configmaps", "istio-ca-root-cert", true, "informer on metadata.name=istio-ca-root-cert"},
	{appNS, "create", "", "configmaps", "", true, "create a missing istio-ca-root-cert (RBAC cannot narrow create)"},
	{appNS, "patch", "", "configmaps", "istio-ca-root-cert", false, "written with update only"},
	{appNS, "delete", "", "configmaps", "istio-ca-root-cert", false, "never deleted"},
	{appNS, "get", "", "configmaps", "app-config", false, "other ConfigMaps are not read"},
	{appNS, "update", "", "configmaps", "app-config", false, "other ConfigMaps are not written"},
	{"", "list", "", "configmaps", "", false, "no cluster-wide list of ConfigMaps"},
	{"kube-system", "update", "", "configmaps", "aws-auth", false, "the cluster's IAM mapping"},
	{"kube-system", "patch", "", "configmaps", "aws-auth", false, "the cluster's IAM mapping"},
	{"kube-system", "get", "", "configmaps", "aws-auth", false, "the cluster's IAM mapping"},
	{"kube-system", "update", "", "configmaps", "coredns", false, "cluster DNS"},
	// Leases.
	{meshNS, "update", "coordination.k8s.io", "leases", "meshd-status-leader", true, "the status controller's lock"},
	{meshNS, "update", "coordination.k8s.io", "leases", "meshd-revision-default", true, "the revision controller's lock, own revision"},
	{meshNS, "update", "coordination.k8s.io", "leases", "meshd-revision-canary", false, "another revision's lock"},
	{meshNS, "update", "coordination.k8s.io", "leases", "istio-gateway-deployment", false, "istiod's Lease locks"},
	{meshNS, "delete", "coordination.k8s.io", "leases", "meshd-status-leader", false, "no delete without sessions"},
	{"kube-system", "update", "coordination.k8s.io", "leases", "kube-controller-manager", false, "the cluster's own elections"},
	// Secrets.
	{meshNS, "get", "", "secrets", "cacerts", true, "the mesh CA's root (plugged-in CA)"},
	{meshNS, "watch", "", "secrets", "istio-ca-secret", true, "the mesh CA's root (istiod's own CA)"},
	{meshNS, "list", "", "secrets", "", false, "no other Secret of the mesh namespace"},
	{meshNS, "update", "", "secrets", "cacerts", false, "the CA is never written"},
	{appNS, "get", "", "secrets", "cacerts", false, "no Secret outside the mesh namespace"},
	// The rest.
	{"", "get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "istio-revision-tag-default", true, "the default revision"},
	{"", "update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "istio-revision-tag-default", false, "the default is only read"},
	{"", "get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "istio-sidecar-injector", false, "other webhooks"},
	{"", "list", "", "namespaces", "", true, "where the root certificate goes"},
	{"", "update", "", "namespaces", "bookinfo", false, "namespaces are only read"},
	{meshNS, "create", "", "events", "", true, "Events on the locks and the CA Secret"},
	{meshNS, "get", "", "pods", "", true, "Pod-aware failover: a holder reads its own Pod"},
	{meshNS, "list", "", "pods", "", true, "Pod-aware failover: a follower watches the holder's Pod by name"},
	{meshNS, "watch", "", "pods", "", true, "Pod-aware failover: a follower watches the holder's Pod by name"},
	{meshNS, "update", "", "pods", "", false, "Pods are only read"},
	{meshNS, "update", "", "pods/status", "", false, "the kubelet's reports are only read"},
	{meshNS, "delete", "", "pods", "", false, "Pods are never deleted"},
	{meshNS, "create", "", "pods/eviction", "", false, "Pods are never evicted"},
	{appNS, "get", "", "pods", "", false, "no Pods outside the mesh namespace"},
	{"", "list", "", "pods", "", false, "no cluster-wide list of Pods"},
	{meshNS, "create", "rbac.authorization.k8s.io", "rolebindings", "", false, "no RBAC"},
}

// The ServiceAccount of deploy/meshd.yaml, applied to a real API server,
// may do what meshd needs and nothing of the denied rows: the server's own
// authorizer answers each row through a SubjectAccessReview. The table is
// the one in docs/operations.md.
func TestLeastPrivilege(t *testing.T) {
	c := testcluster.Get(t)
	sa := applyRendered(t, c, render.Release{Name: "meshd", Namespace: meshNS})
	user := serviceaccount(meshNS, sa)
	for _, a := range leastPrivilege {
		if got := allowed(t, c.Client, user, meshNS, a); got != a.allowed {
			t.Errorf("%s: allowed = %v, want %v (%s)", a, got, a.allowed, a.why)
		}
	}
	want := accessTable(leastPrivilege)
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), want) {
		t.Errorf("docs/operations.md lacks the current table of rights:\n%s", want)
	}
}

// The narrowed ConfigMap rights work for what meshd really sends: with the
// ServiceAccount's own token, a cluster-wide list and watch selecting
// metadata.name=istio-ca-root-cert succeed, the same without the selector
// is refused, reading or writing aws-auth in kube-system is refused and an
// update of istio-ca-root-cert succeeds.
func TestNarrowedConfigMapRightsOnTheWire(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	mesh, app := c.NewNamespace(t), c.NewNamespace(t)
	sa := applyRendered(t, c, render.Release{Name: "meshd", Namespace: mesh})
	cfg, err := c.ServiceAccountConfig(ctx, mesh, sa)
	if err != nil {
		t.Fatal(err)
	}
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const system = "kube-system"
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "istio-ca-root-cert", Namespace: app}, Data: map[string]string{"root-cert.pem": "old"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "aws-auth", Namespace: system}, Data: map[string]string{"mapRoles": "[]"}},
	} {
		if _, err := c.Client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{}) })
	}
	byName := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "istio-ca-root-cert").String()}
	list, err := as.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, byName)
	if err != nil {
		t.Fatalf("cluster-wide list of istio-ca-root-cert: %v", err)
	}
	found := false
	for _, cm := range list.Items {
		found = found || cm.Namespace == app
	}
	if !found {
		t.Errorf("the list by name does not return %s/istio-ca-root-cert", app)
	}
	byName.ResourceVersion = list.ResourceVersion
	w, err := as.CoreV1().ConfigMaps(metav1.NamespaceAll).Watch(ctx, byName)
	if err != nil {
		t.Fatalf("cluster-wide watch of istio-ca-root-cert: %v", err)
	}
	w.Stop()
	if _, err := as.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("cluster-wide list of every ConfigMap: err = %v, want Forbidden", err)
	}
	if _, err := as.CoreV1().ConfigMaps(app).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list of every ConfigMap of %s: err = %v, want Forbidden", app, err)
	}

	root, err := as.CoreV1().ConfigMaps(app).Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root.Data["root-cert.pem"] = "new"
	if _, err := as.CoreV1().ConfigMaps(app).Update(ctx, root, metav1.UpdateOptions{}); err != nil {
		t.Errorf("update istio-ca-root-cert: %v", err)
	}
	if _, err := as.CoreV1().ConfigMaps(system).Get(ctx, "aws-auth", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get aws-auth: err = %v, want Forbidden", err)
	}
	awsAuth := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "aws-auth", Namespace: system}, Data: map[string]string{"mapRoles": "[evil]"}}
	if _, err := as.CoreV1().ConfigMaps(system).Update(ctx, awsAuth, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("update aws-auth: err = %v, want Forbidden", err)
	}
	if err := as.CoreV1().ConfigMaps(app).Delete(ctx, "istio-ca-root-cert", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete istio-ca-root-cert: err = %v, want Forbidden", err)
	}
	// A create of an existing name is refused by the API server, whatever
	// RBAC allows: the broad create right cannot overwrite aws-auth.
	awsAuth.ResourceVersion = ""
	if _, err := as.CoreV1().ConfigMaps(system).Create(ctx, awsAuth, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("create over an existing aws-auth: err = %v, want AlreadyExists", err)
	}
	got, err := c.Client.CoreV1().ConfigMaps(system).Get(ctx, "aws-auth", metav1.GetOptions{})
	if err != nil || got.Data["mapRoles"] != "[]" {
		t.Errorf("aws-auth after the attempts: %v, %v", got.Data, err)
	}
}

// With sessions or a coordinated electionMode the Lease names are not
// known in advance: Lease updates are namespace-wide there, and only
// there; ConfigMaps stay narrowed in every mode.
func TestLeaseRightsFollowTheMode(t *testing.T) {
	c := testcluster.Get(t)
	for _, tc := range []struct {
		values         map[string]any
		anyLease, del  bool
		candidatesEdit bool
	}{
		{map[string]any{}, false, false, false},
		{map[string]any{"sessions": true}, true, true, false},
		{map[string]any{"electionMode": "coordinated"}, true, false, true},
	} {
		t.Run(fmt.Sprint(tc.values), func(t *testing.T) {
			ns := c.NewNamespace(t)
			sa := applyRendered(t, c, render.Release{Name: "meshd", Namespace: ns, Values: tc.values})
			user := serviceaccount(ns, sa)
			for _, a := range []access{
				{ns, "update", "coordination.k8s.io", "leases", "meshd-status-leader", true, ""},
				{ns, "update", "coordination.k8s.io", "leases", "meshd-session-30s-a-b", tc.anyLease, ""},
				{ns, "delete", "coordination.k8s.io", "leases", "meshd-session-30s-a-b", tc.del, ""},
				{ns, "create", "coordination.k8s.io", "leasecandidates", "", tc.candidatesEdit, ""},
				{ns, "update", "", "configmaps", "istio", false, ""},
				{"kube-system", "update", "", "configmaps", "aws-auth", false, ""},
			} {
				if got := allowed(t, c.Client, user, ns, a); got != a.allowed {
					t.Errorf("%s: allowed = %v, want %v", a, got, a.allowed)
				}
			}
		})
	}
}

func (a access) String() string {
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	res := a.resource
	if a.group != "" {
		res += "." + a.group
	}
	if a.name != "" {
		res += "/" + a.name
	}
	return fmt.Sprintf("%s %s %s", a.verb, res, where)
}

// accessTable is the Markdown table of rows, as docs/operations.md shows it.
func accessTable(rows []access) string {
	var b strings.Builder
	b.WriteString("| namespace | verb | resource | name | meshd | why |\n|---|---|---|---|---|---|\n")
	for _, a := range rows {
		ns := a.namespace
		if ns == "" {
			ns = "(cluster)"
		}
		res := a.resource
		if a.group != "" {
			res += "." + a.group
		}
		name := a.name
		if name == "" {
			name = "(any)"
		}
		verdict := "denied"
		if a.allowed {
			verdict = "**allowed**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", ns, a.verb, res, name, verdict, a.why)
	}
	return b.String()
}

func serviceaccount(ns, name string) authorizationv1.SubjectAccessReviewSpec {
	return authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
}

// allowed asks the API server whether user may do a. Rows written for the
// mesh namespace of deploy/meshd.yaml are asked in meshNS of the release.
func allowed(t *testing.T, client kubernetes.Interface, user authorizationv1.SubjectAccessReviewSpec, meshNSOfRelease string, a access) bool {
	t.Helper()
	ns := a.namespace
	if ns == meshNS {
		ns = meshNSOfRelease
	}
	spec := user
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: ns, Verb: a.verb, Group: a.group,
		Resource: a.resource, Name: a.name}
	sar, err := client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(),
		&authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview %s: %v", a, err)
	}
	if sar.Status.EvaluationError != "" {
		t.Fatalf("SubjectAccessReview %s: %s", a, sar.Status.EvaluationError)
	}
	return sar.Status.Allowed
}

// applyRendered renders the chart for rel, creates its ServiceAccount and
// RBAC objects (what grants rights; the workloads grant none), deletes them
// when the test ends, and returns the ServiceAccount's name.
func applyRendered(t *testing.T, c *testcluster.Cluster, rel render.Release) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, rel.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rel.Namespace}}
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	manifest, err := render.Render(chartDir, rel)
	if err != nil {
		t.Fatal(err)
	}
	ns := rel.Namespace
	var sa string
	for _, obj := range objects(t, manifest) {
		var err error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			sa = o.Name
			_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = c.Client.CoreV1().ServiceAccounts(ns).Delete(ctx, o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.Role:
			_, err = c.Client.RbacV1().Roles(ns).Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = c.Client.RbacV1().Roles(ns).Delete(ctx, o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.RoleBinding:
			_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = c.Client.RbacV1().RoleBindings(ns).Delete(ctx, o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.ClusterRole:
			_, err = c.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = c.Client.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.ClusterRoleBinding:
			_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = c.Client.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{}) })
		}
		if err != nil {
			t.Fatalf("apply %T: %v", obj, err)
		}
	}
	if sa == "" {
		t.Fatal("the chart renders no ServiceAccount")
	}
	// The authorizer reads RBAC objects from a cache: wait until it has
	// both bindings, each seen through a right only it grants.
	webhook := "istio-revision-tag-default-" + ns
	if ns == "istio-system" {
		webhook = "istio-revision-tag-default"
	}
	user := serviceaccount(ns, sa)
	eventually(t, 30*time.Second, func() error {
		for _, a := range []access{
			{namespace: ns, verb: "get", resource: "configmaps", name: "meshd-status"},
			{verb: "get", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", name: webhook},
		} {
			if !allowed(t, c.Client, user, ns, a) {
				return fmt.Errorf("the authorizer does not allow %s yet", a)
			}
		}
		return nil
	})
	return sa
}
