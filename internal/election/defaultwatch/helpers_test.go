package defaultwatch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/pkg/revisions"
)

// The helpers below are those of package revisions' watcher tests.

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
func start(t *testing.T, w revisions.DefaultWatcher) {
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

func rev(v string) map[string]string { return map[string]string{"istio.io/rev": v} }
