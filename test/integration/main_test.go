// Package integration runs meshd's elections against a real kube-apiserver
// and etcd on 127.0.0.1 (see internal/testing/testcluster). Every test gets its own
// namespace; timings use a 2s ttl (renew deadline 1s, retry period 500ms).
package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
	"github.com/meshd-io/meshd/pkg/revisions"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

const ttl = 2 * time.Second

// instance is one candidate running in the background. Its run function
// records when it starts and stops.
type instance struct {
	name   string
	le     *election.LeaderElection
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	running bool
	started []time.Time
	stopped []time.Time
}

func newInstance(t *testing.T, name string, le *election.LeaderElection, err error) *instance {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	in := &instance{name: name, le: le, done: make(chan struct{})}
	le.AddRunFunction(func(stop <-chan struct{}) {
		in.mu.Lock()
		in.running = true
		in.started = append(in.started, time.Now())
		in.mu.Unlock()
		<-stop
		in.mu.Lock()
		in.running = false
		in.stopped = append(in.stopped, time.Now())
		in.mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go func() { defer close(in.done); le.RunContext(ctx) }()
	t.Cleanup(in.stop)
	return in
}

func (in *instance) leads() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.running
}

func (in *instance) lastStart() time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.started) == 0 {
		return time.Time{}
	}
	return in.started[len(in.started)-1]
}

// stop cancels the instance and waits for Run to return.
func (in *instance) stop() {
	in.cancel()
	<-in.done
}

func leaders(ins ...*instance) []string {
	var out []string
	for _, in := range ins {
		if in.leads() {
			out = append(out, in.name)
		}
	}
	return out
}

// opts are the options every test election uses.
func opts(t *testing.T, extra ...election.Option) []election.Option {
	return append([]election.Option{
		election.WithTTL(ttl),
		election.WithEnabled(true),
		election.WithPrioritized(true),
		election.WithReleaseOnCancel(true),
		election.WithStopTimeout(time.Second),
		election.WithLogger(zaptest.NewLogger(t).Named("election")),
	}, extra...)
}

// setDefaultRevision creates or updates the webhook that names the default
// revision for mesh namespace ns; an empty revision removes the label.
func setDefaultRevision(t *testing.T, client kubernetes.Interface, ns, revision string) {
	t.Helper()
	ctx := context.Background()
	name := revisions.DefaultWebhookName(ns)
	hooks := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	wh, err := hooks.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		wh = &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
		setLabel(wh, revision)
		if _, err := hooks.Create(ctx, wh, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hooks.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	setLabel(wh, revision)
	if _, err := hooks.Update(ctx, wh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setLabel(wh *admissionv1.MutatingWebhookConfiguration, revision string) {
	if wh.Labels == nil {
		wh.Labels = map[string]string{}
	}
	if revision == "" {
		delete(wh.Labels, revisions.DefaultRevisionLabel)
		return
	}
	wh.Labels[revisions.DefaultRevisionLabel] = revision
}

// configMapRecord reads the record of a ConfigMap lock.
func configMapRecord(t *testing.T, client kubernetes.Interface, ns, name string) (resourcelock.Record, *corev1.ConfigMap) {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey]))
	if err != nil {
		t.Fatalf("decode %s/%s: %v", ns, name, err)
	}
	return *rec, cm
}
