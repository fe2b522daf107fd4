package revisions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

const timeout = 10 * time.Second

// recorder collects handler calls.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) handler(prefix string) func(revision string) {
	return func(rev string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, prefix+rev)
	}
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// waitCalls waits until the calls are exactly want.
func (r *recorder) waitCalls(t *testing.T, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) {
			got := r.get()
			if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
				return false, fmt.Errorf("handler calls %q, want %q", got, want)
			}
			return len(got) == len(want), nil
		})
	if err != nil {
		t.Fatalf("%v (calls %q, want %q)", err, r.get(), want)
	}
}

// start runs w until the test ends and waits for it to sync.
func start(t *testing.T, w DefaultWatcher) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(stop)
	}()
	t.Cleanup(func() {
		close(stop)
		select {
		case <-done:
		case <-time.After(timeout):
			t.Error("Run did not return after stop")
		}
	})
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return w.HasSynced(), nil })
	if err != nil {
		t.Fatalf("watcher did not sync: %v", err)
	}
}

func webhook(name string, labels map[string]string) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	}
}

type webhooks struct {
	t      *testing.T
	client kubernetes.Interface
}

func (c webhooks) create(name string, labels map[string]string) {
	c.t.Helper()
	if _, err := c.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(
		context.Background(), webhook(name, labels), metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c webhooks) update(name string, labels, annotations map[string]string) {
	c.t.Helper()
	api := c.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	wh, err := api.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	wh.Labels = labels
	wh.Annotations = annotations
	if _, err := api.Update(context.Background(), wh, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c webhooks) delete(name string) {
	c.t.Helper()
	if err := c.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(
		context.Background(), name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func rev(v string) map[string]string { return map[string]string{"istio.io/rev": v} }

func TestDefaultWatcherLifecycle(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset()
	wh := webhooks{t, client}
	const name = "istio-revision-tag-default"

	w, err := NewDefaultWatcher(client, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	w.AddHandler(rec.handler(""))
	if w.HasSynced() {
		t.Fatal("synced before Run")
	}

	t.Run("no webhook", func(t *testing.T) {
		start(t, w)
		if got := w.GetDefault(); got != "" {
			t.Fatalf("GetDefault() = %q with no webhook", got)
		}
		rec.waitCalls(t)

		wh.create(name, rev("canary"))
		rec.waitCalls(t, "canary")
		if got := w.GetDefault(); got != "canary" {
			t.Fatalf("GetDefault() = %q after the handler ran, want canary", got)
		}

		wh.update(name, rev("stable"), nil)
		rec.waitCalls(t, "canary", "stable")

		// A no-op update (label unchanged) must not call the handler; the
		// change that follows proves the no-op was delivered first.
		wh.update(name, rev("stable"), map[string]string{"touched": "yes"})
		wh.update(name, map[string]string{"istio.io/rev": "stable", "other": "x"}, nil)
		wh.update(name, rev("canary"), nil)
		rec.waitCalls(t, "canary", "stable", "canary")

		wh.update(name, map[string]string{"other": "x"}, nil) // label removed
		rec.waitCalls(t, "canary", "stable", "canary", "")

		wh.update(name, rev("stable"), nil)
		wh.update(name, rev(""), nil) // empty value
		rec.waitCalls(t, "canary", "stable", "canary", "", "stable", "")

		wh.update(name, rev("canary"), nil)
		wh.delete(name)
		rec.waitCalls(t, "canary", "stable", "canary", "", "stable", "", "canary", "")
		if got := w.GetDefault(); got != "" {
			t.Fatalf("GetDefault() = %q after delete", got)
		}
	})
}

func TestDefaultWatcherInitialState(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset(webhook("istio-revision-tag-default", rev("canary")))
	w, err := NewDefaultWatcher(client, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	w.AddHandler(rec.handler("a:"))
	w.AddHandler(rec.handler("b:"))

	t.Run("run", func(t *testing.T) {
		start(t, w)
		// HasSynced means the initial object has been handled already.
		if got := w.GetDefault(); got != "canary" {
			t.Fatalf("GetDefault() = %q right after sync, want canary", got)
		}
		if got := rec.get(); !slices.Equal(got, []string{"a:canary", "b:canary"}) {
			t.Fatalf("calls %q right after sync, want both handlers in order", got)
		}

		// Not retroactive: a late handler sees only later changes.
		w.AddHandler(rec.handler("c:"))
		webhooks{t, client}.update("istio-revision-tag-default", rev("stable"), nil)
		rec.waitCalls(t, "a:canary", "b:canary", "a:stable", "b:stable", "c:stable")
	})
}

func TestDefaultWatcherIgnoresOtherWebhooks(t *testing.T) {
	defer goleak.VerifyNone(t)
	// The fake client ignores field selectors, so the watcher sees every
	// webhook and must filter by name itself.
	client := fake.NewClientset(
		webhook("istio-revision-tag-default", rev("wrong")),
		webhook("istio-sidecar-injector", rev("wrong")),
	)
	wh := webhooks{t, client}
	w, err := NewDefaultWatcher(client, Options{MeshNamespace: "mesh"})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	w.AddHandler(rec.handler(""))

	t.Run("run", func(t *testing.T) {
		start(t, w)
		if got := w.GetDefault(); got != "" {
			t.Fatalf("GetDefault() = %q, want \"\": only istio-revision-tag-default-mesh counts", got)
		}
		wh.update("istio-sidecar-injector", rev("wrong2"), nil)
		wh.delete("istio-revision-tag-default")
		wh.create("istio-revision-tag-default-mesh", rev("canary"))
		rec.waitCalls(t, "canary")
		wh.create("istio-revision-tag-default", rev("wrong3"))
		wh.delete("istio-sidecar-injector")
		wh.update("istio-revision-tag-default-mesh", rev("stable"), nil)
		rec.waitCalls(t, "canary", "stable")
	})
}

func TestDefaultWatcherCustomNameAndLabel(t *testing.T) {
	defer goleak.VerifyNone(t)
	client := fake.NewClientset(webhook("my-default", map[string]string{
		"istio.io/rev":                 "ignored",
		"example.com/default-revision": "blue",
	}))
	w, err := NewDefaultWatcher(client, Options{
		MeshNamespace: "mesh",
		WebhookName:   "my-default",
		RevisionLabel: "example.com/default-revision",
	})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	w.AddHandler(rec.handler(""))

	t.Run("run", func(t *testing.T) {
		start(t, w)
		rec.waitCalls(t, "blue")
		webhooks{t, client}.update("my-default", map[string]string{"example.com/default-revision": "green"}, nil)
		rec.waitCalls(t, "blue", "green")
	})
}

func TestDefaultWatcherRunTwice(t *testing.T) {
	defer goleak.VerifyNone(t)
	w, err := NewDefaultWatcher(fake.NewClientset(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("run", func(t *testing.T) {
		start(t, w)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Run(stop)
		}()
		select {
		case <-done:
			t.Fatal("second Run returned before stop")
		case <-time.After(50 * time.Millisecond):
		}
		close(stop)
		<-done
	})
}

func TestDefaultWebhookName(t *testing.T) {
	for ns, want := range map[string]string{
		"":             "istio-revision-tag-default",
		"istio-system": "istio-revision-tag-default",
		"mesh":         "istio-revision-tag-default-mesh",
		"istio-canary": "istio-revision-tag-default-istio-canary",
	} {
		if got := DefaultWebhookName(ns); got != want {
			t.Errorf("DefaultWebhookName(%q) = %q, want %q", ns, got, want)
		}
	}
}

func TestNewDefaultWatcherValidation(t *testing.T) {
	client := fake.NewClientset()
	cases := []struct {
		name   string
		client kubernetes.Interface
		opts   Options
		want   []string // substrings of the error; none means valid
	}{
		{name: "zero options", client: client},
		{name: "custom", client: client, opts: Options{MeshNamespace: "mesh", WebhookName: "a.b-c", RevisionLabel: "example.com/rev"}},
		{name: "nil client", want: []string{"nil Kubernetes client"}},
		{name: "bad webhook name", client: client, opts: Options{WebhookName: "Bad_Name"}, want: []string{"WebhookName", `"Bad_Name"`}},
		{name: "bad label", client: client, opts: Options{RevisionLabel: "bad label!"}, want: []string{"RevisionLabel", `"bad label!"`}},
		{name: "bad label prefix", client: client, opts: Options{RevisionLabel: "Not_A_Domain/rev"}, want: []string{"RevisionLabel"}},
		{name: "bad namespace", client: client, opts: Options{MeshNamespace: "Mesh NS"}, want: []string{"MeshNamespace", "WebhookName"}},
		{
			name: "all fields bad", client: client,
			opts: Options{MeshNamespace: "-x", WebhookName: "UPPER", RevisionLabel: "/"},
			want: []string{"MeshNamespace", "WebhookName", "RevisionLabel"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewDefaultWatcher(tc.client, tc.opts)
			if len(tc.want) == 0 {
				if err != nil || w == nil {
					t.Fatalf("NewDefaultWatcher() = %v, %v; want a watcher", w, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("NewDefaultWatcher() succeeded, want an error mentioning %q", tc.want)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %s", err, s)
				}
			}
		})
	}
}
