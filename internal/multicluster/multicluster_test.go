package multicluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// kubeconfig returns a valid kubeconfig for server, changed by edit.
func kubeconfig(t testing.TB, server string, edit func(*clientcmdapi.Config)) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("not checked here")}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "secret-token"}
	cfg.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "ctx"
	if edit != nil {
		edit(cfg)
	}
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRESTConfig(t *testing.T) {
	good := kubeconfig(t, "https://127.0.0.1:6443", nil)
	rc, err := RESTConfig(good)
	if err != nil {
		t.Fatalf("valid kubeconfig: %v", err)
	}
	if rc.Host != "https://127.0.0.1:6443" || rc.BearerToken != "secret-token" {
		t.Errorf("host %q token %q", rc.Host, rc.BearerToken)
	}
	noCurrent := kubeconfig(t, "https://127.0.0.1:6443", func(c *clientcmdapi.Config) { c.CurrentContext = "" })
	if _, err := RESTConfig(noCurrent); err != nil {
		t.Errorf("the only context should be used without current-context: %v", err)
	}

	for name, tc := range map[string]struct {
		data []byte
		want []string
	}{
		"not yaml":  {[]byte("{{{"), []string{"not a kubeconfig"}},
		"empty":     {[]byte("apiVersion: v1\nkind: Config\n"), []string{"0 contexts and no current-context"}},
		"no server": {kubeconfig(t, "", nil), []string{"no server"}},
		"exec": {kubeconfig(t, "https://127.0.0.1:6443", func(c *clientcmdapi.Config) {
			c.AuthInfos["u"].Exec = &clientcmdapi.ExecConfig{Command: "some-credential-plugin", APIVersion: "client.authentication.k8s.io/v1"}
		}), []string{"exec", "credential plugin"}},
		"files": {kubeconfig(t, "https://127.0.0.1:6443", func(c *clientcmdapi.Config) {
			c.AuthInfos["u"].TokenFile = "token"
			c.AuthInfos["u"].ClientKey = "client.key"
			c.Clusters["c"].CertificateAuthority = "ca.crt"
		}), []string{"tokenFile", "client-key", "certificate-authority (a file"}},
		"auth provider": {kubeconfig(t, "https://127.0.0.1:6443", func(c *clientcmdapi.Config) {
			c.AuthInfos["u"].AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		}), []string{`auth-provider "oidc"`}},
		"missing context": {kubeconfig(t, "https://127.0.0.1:6443", func(c *clientcmdapi.Config) { c.CurrentContext = "other" }),
			[]string{`"other" does not exist`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := RESTConfig(tc.data)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: name,
		Labels: map[string]string{SecretLabel: "true"}}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestParse(t *testing.T) {
	cs, errs := Parse(secret("s", map[string]string{"b": "kb", "a": "ka", "local": "kl", "empty": ""}), "local")
	if len(cs) != 2 || cs[0].ID != "a" || cs[1].ID != "b" || cs[0].Secret != "istio-system/s" || string(cs[1].Kubeconfig) != "kb" {
		t.Errorf("clusters %+v", cs)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `cluster "empty" from Secret istio-system/s: empty kubeconfig`) {
		t.Errorf("errors %v", errs)
	}
	if cs[0].Hash() == cs[1].Hash() {
		t.Error("different kubeconfigs, same hash")
	}
}

// updates records what a Watcher hands over.
type updates struct {
	mu   sync.Mutex
	last []Cluster
	errs []error
	n    int
}

func (u *updates) Update(cs []Cluster, errs []error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.last, u.errs = cs, errs
	u.n++
}

func (u *updates) ids() (string, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var ids []string
	for _, c := range u.last {
		ids = append(ids, c.ID+"@"+c.Secret)
	}
	return strings.Join(ids, ","), len(u.errs)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatcherFollowsSecrets(t *testing.T) {
	ctx := context.Background()
	unlabelled := secret("other", map[string]string{"x": "k"})
	unlabelled.Labels = nil
	client := fake.NewClientset(secret("s1", map[string]string{"c1": "k1"}), unlabelled)
	// The fake clientset ignores label selectors: the watcher must check
	// the label itself as well.
	u := &updates{}
	w := NewWatcher(client, "istio-system", "local", u, nil)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "the first update", func() bool { ids, _ := u.ids(); return ids == "c1@istio-system/s1" && w.HasSynced() })
	secrets := client.CoreV1().Secrets("istio-system")
	if _, err := secrets.Create(ctx, secret("s0", map[string]string{"c1": "other", "c2": "k2"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// c1 stays with s1, which provided it first, though s0 sorts first.
	waitFor(t, "c2 added, c1 kept", func() bool {
		ids, n := u.ids()
		return ids == "c1@istio-system/s1,c2@istio-system/s0" && n == 1
	})
	if err := secrets.Delete(ctx, "s1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c1 moved to s0", func() bool {
		ids, n := u.ids()
		return ids == "c1@istio-system/s0,c2@istio-system/s0" && n == 0
	})
	if err := secrets.Delete(ctx, "s0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no clusters", func() bool { ids, _ := u.ids(); return ids == "" })
}

func TestShouldJoin(t *testing.T) {
	ns := func(annotation *string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}
		if annotation != nil {
			n.Annotations = map[string]string{ControlPlaneClustersAnnotation: *annotation}
		}
		return n
	}
	str := func(s string) *string { return &s }
	for name, tc := range map[string]struct {
		objects []runtime.Object
		join    bool
		reason  string
	}{
		"no namespace":      {nil, false, "no namespace istio-system"},
		"no annotation":     {[]runtime.Object{ns(nil)}, false, "has no topology.istio.io/controlPlaneClusters"},
		"names us":          {[]runtime.Object{ns(str("c0, c1"))}, true, "names this cluster"},
		"any":               {[]runtime.Object{ns(str("*"))}, true, "names this cluster"},
		"names another one": {[]runtime.Object{ns(str("c0"))}, false, `does not name cluster "c1"`},
	} {
		t.Run(name, func(t *testing.T) {
			join, reason, err := ShouldJoin(context.Background(), fake.NewClientset(tc.objects...), "istio-system", "c1")
			if err != nil || join != tc.join || !strings.Contains(reason, tc.reason) {
				t.Errorf("join %v reason %q err %v; want %v, %q", join, reason, err, tc.join, tc.reason)
			}
		})
	}

	// Errors are retried until the API server answers, or ctx ends.
	client := fake.NewClientset(ns(str("c1")))
	fails := 2
	client.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails > 0 {
			fails--
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	join, _, err := ShouldJoin(context.Background(), client, "istio-system", "c1")
	if err != nil || !join {
		t.Errorf("after two errors: join %v err %v", join, err)
	}
	broken := fake.NewClientset()
	broken.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, _, err := ShouldJoin(ctx, broken, "istio-system", "c1"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("unreachable cluster: err %v, want the last error named", err)
	}
}
