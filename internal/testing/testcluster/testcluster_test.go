package testcluster_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func whoAmI(t *testing.T, ctx context.Context, cs kubernetes.Interface) authenticationv1.UserInfo {
	t.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return r.Status.UserInfo
}

func TestClusterIsUp(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ctxFor(t)
	if !strings.HasPrefix(c.Config.Host, "https://127.0.0.1:") {
		t.Errorf("apiserver host %q is not on 127.0.0.1", c.Config.Host)
	}
	if c.Config.Insecure || len(c.Config.CAData) == 0 {
		t.Errorf("admin config should verify the serving certificate with the generated CA")
	}
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("ServerVersion: %v", err)
	}
	t.Logf("server version %s", v.GitVersion)
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Errorf("get kube-system: %v", err)
	}
	u := whoAmI(t, ctx, c.Client)
	if u.Username != testcluster.AdminUser || !contains(u.Groups, "system:masters") {
		t.Errorf("admin identity = %+v, want %s in system:masters", u, testcluster.AdminUser)
	}
}

func TestConfigMapCreateUpdateConflict(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ctxFor(t)
	ns := c.NewNamespace(t)
	cms := c.Client.CoreV1().ConfigMaps(ns)

	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "lock"},
		Data:       map[string]string{"holder": "a"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lock"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: got %v, want AlreadyExists", err)
	}

	first := created.DeepCopy()
	first.Data["holder"] = "b"
	updated, err := cms.Update(ctx, first, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if updated.ResourceVersion == created.ResourceVersion {
		t.Fatalf("resourceVersion did not change on update")
	}

	stale := created.DeepCopy()
	stale.Data["holder"] = "c"
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with stale resourceVersion: got %v, want Conflict", err)
	}
	got, err := cms.Get(ctx, "lock", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["holder"] != "b" {
		t.Fatalf("holder = %q after conflicting update, want b", got.Data["holder"])
	}
}

func TestRestrictedUserNeedsRBAC(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ctxFor(t)
	ns := c.NewNamespace(t)
	user := testcluster.RestrictedUsers[0]
	cs := clientFor(t, c.ConfigForUser(user))

	u := whoAmI(t, ctx, cs)
	if u.Username != user || contains(u.Groups, "system:masters") {
		t.Fatalf("identity = %+v, want %s without system:masters", u, user)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("create as %s without RBAC: got %v, want Forbidden", user, err)
	}

	bindRole(t, ctx, c, ns, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
	testutil.Eventually(t, 30*time.Second, func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		return err
	})
	// The role grants create only.
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "x", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("get with a create-only role: got %v, want Forbidden", err)
	}
	// Another restricted user is unaffected by the binding.
	other := clientFor(t, c.ConfigForUser(testcluster.RestrictedUsers[1]))
	cm2 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "y"}}
	if _, err := other.CoreV1().ConfigMaps(ns).Create(ctx, cm2, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("create as %s: got %v, want Forbidden", testcluster.RestrictedUsers[1], err)
	}
}

func TestServiceAccountTokenWithRole(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ctxFor(t)
	ns := c.NewNamespace(t)

	cfg, err := c.ServiceAccountConfig(ctx, ns, "elector")
	if err != nil {
		t.Fatal(err)
	}
	cs := clientFor(t, cfg)
	want := "system:serviceaccount:" + ns + ":elector"
	if u := whoAmI(t, ctx, cs); u.Username != want {
		t.Fatalf("identity = %q, want %q", u.Username, want)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list without RBAC: got %v, want Forbidden", err)
	}

	bindRole(t, ctx, c, ns, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "elector", Namespace: ns},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update"}})
	testutil.Eventually(t, 30*time.Second, func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lock"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create with role: %v", err)
	}
	if _, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list leases (not granted): got %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list configmaps in another namespace: got %v, want Forbidden", err)
	}

	// Asking again reuses the existing account.
	if _, err := c.ServiceAccountConfig(ctx, ns, "elector"); err != nil {
		t.Fatalf("second ServiceAccountConfig: %v", err)
	}
}

func TestWriteKubeconfig(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ctxFor(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.WriteKubeconfig(path); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if u := whoAmI(t, ctx, clientFor(t, cfg)); u.Username != testcluster.AdminUser {
		t.Fatalf("kubeconfig user = %q, want %s", u.Username, testcluster.AdminUser)
	}
	restricted := testcluster.KubeconfigContext + "-" + testcluster.RestrictedUsers[2]
	cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: restricted}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if u := whoAmI(t, ctx, clientFor(t, cfg)); u.Username != testcluster.RestrictedUsers[2] {
		t.Fatalf("context %s user = %q", restricted, u.Username)
	}
}

func TestRestartAPIServerKeepsData(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ctxFor(t)
	ns := c.NewNamespace(t)
	before := createMarker(t, ctx, c, ns)
	start := time.Now()
	if err := c.RestartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("apiserver restarted in %v", time.Since(start).Round(time.Millisecond))
	checkMarker(t, ctx, c, ns, before)
}

func TestRestartEtcdKeepsData(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ctxFor(t)
	ns := c.NewNamespace(t)
	before := createMarker(t, ctx, c, ns)
	start := time.Now()
	if err := c.RestartEtcd(); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd restarted in %v", time.Since(start).Round(time.Millisecond))
	checkMarker(t, ctx, c, ns, before)
}

func TestMissingBinariesSayMakeKubeBins(t *testing.T) {
	_, err := testcluster.Start(testcluster.Options{BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `run "make kube-bins"`) {
		t.Fatalf("Start with an empty BinDir: got %v, want an error telling to run make kube-bins", err)
	}
}

func TestStartFailureShowsLogTail(t *testing.T) {
	start := time.Now()
	c, err := testcluster.Start(testcluster.Options{APIServerFlags: []string{"--no-such-flag=1"}})
	if err == nil {
		c.Stop()
		t.Fatal("Start with an unknown apiserver flag succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "kube-apiserver did not become ready") || !strings.Contains(msg, "no-such-flag") {
		t.Fatalf("error does not explain the failure with the apiserver log tail:\n%s", msg)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("failing Start took %v; it should notice the apiserver exiting", d)
	}
}

func createMarker(t *testing.T, ctx context.Context, c *testcluster.Cluster, ns string) *corev1.ConfigMap {
	t.Helper()
	cm, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "marker"},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create marker: %v", err)
	}
	return cm
}

func checkMarker(t *testing.T, ctx context.Context, c *testcluster.Cluster, ns string, before *corev1.ConfigMap) {
	t.Helper()
	var got *corev1.ConfigMap
	testutil.Eventually(t, 30*time.Second, func() error {
		var err error
		got, err = c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "marker", metav1.GetOptions{})
		return err
	})
	if got.UID != before.UID || got.ResourceVersion != before.ResourceVersion || got.Data["k"] != "v" {
		t.Fatalf("marker after restart = uid %s rv %s data %v; before uid %s rv %s",
			got.UID, got.ResourceVersion, got.Data, before.UID, before.ResourceVersion)
	}
	// Writes work too.
	got.Data["k"] = "w"
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update after restart: %v", err)
	}
}

// bindRole creates a Role with rule and a RoleBinding of it to subject.
func bindRole(t *testing.T, ctx context.Context, c *testcluster.Cluster, ns string, subject rbacv1.Subject, rule rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "test-role"}, Rules: []rbacv1.PolicyRule{rule}}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role: %v", err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-role"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "test-role"},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create rolebinding: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// StartSeveral starts independent control planes: what one stores, the
// other does not see, and each Kubeconfig reaches its own.
func TestStartSeveralAreIndependent(t *testing.T) {
	cs, err := testcluster.StartSeveral(2, testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := testcluster.StopAll(cs); err != nil {
			t.Error(err)
		}
	}()
	ctx := ctxFor(t)
	if cs[0].Host() == cs[1].Host() || cs[0].EtcdURL == cs[1].EtcdURL {
		t.Fatalf("shared endpoints: %s %s, %s %s", cs[0].Host(), cs[1].Host(), cs[0].EtcdURL, cs[1].EtcdURL)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-the-first"}}
	if _, err := cs[0].Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs[1].Client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the second cluster sees the first one's namespace (err %v)", err)
	}
	for i, c := range cs {
		data, err := c.Kubeconfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != c.Host() || cfg.CAFile != "" || cfg.BearerTokenFile != "" {
			t.Errorf("cluster %d: kubeconfig host %q, files %q %q; want its own host and everything inline", i, cfg.Host, cfg.CAFile, cfg.BearerTokenFile)
		}
		if got := whoAmI(t, ctx, clientFor(t, cfg)); got.Username != testcluster.AdminUser {
			t.Errorf("cluster %d: kubeconfig acts as %q", i, got.Username)
		}
	}
	if _, err := testcluster.StartSeveral(0, testcluster.Options{}); err == nil {
		t.Error("StartSeveral(0) did not fail")
	}
}
