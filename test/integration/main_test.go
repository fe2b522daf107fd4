// Package integration runs meshd's elections against a real kube-apiserver
// and etcd on 127.0.0.1 (see internal/testing/testcluster). Every test gets its own
// namespace; timings use a 2s ttl (renew deadline 1s, retry period 500ms).
package integration

import (
	"context"
	"flag"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// TestMain runs the package against one control plane. The tests marked
// parallel spend their time waiting for 2s leases, not computing, so up to
// six of them run at once unless -test.parallel says otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "6")
	}
	testcluster.Main(m)
}

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

// opts are the options every test election uses, as defaults (each applies
// where it fits), then extra.
func opts(t *testing.T, extra ...election.Option) []election.Option {
	return append([]election.Option{election.Defaults(
		election.WithTTL(ttl),
		election.WithEnabled(true),
		election.WithPrioritized(true),
		election.WithReleaseOnCancel(true),
		election.WithStopTimeout(time.Second),
		election.WithLogger(zaptest.NewLogger(t).Named("election")),
	)}, extra...)
}

// setDefaultRevision makes revision the default of mesh namespace ns.
func setDefaultRevision(t *testing.T, client kubernetes.Interface, ns, revision string) {
	kubetest.SetDefaultRevision(t, client, ns, revision)
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
