package gate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/election"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	testcluster.Main(m)
}

// candidate is one process's election gating one manager whose controller
// stamps every ConfigMap of the namespace with the identity that
// reconciled it last.
type candidate struct {
	identity string
	le       *election.LeaderElection
	managers atomic.Int32 // built, one per term
	fail     chan error   // makes the running manager fail, ending the term
	stop     context.CancelFunc
	done     chan error
}

// running counts managers running at once across candidates.
type running struct {
	now, most atomic.Int32
}

func (r *running) enter() {
	n := r.now.Add(1)
	for {
		m := r.most.Load()
		if n <= m || r.most.CompareAndSwap(m, n) {
			return
		}
	}
}

func startCandidate(t *testing.T, c *testcluster.Cluster, ns, identity string, live *running) *candidate {
	t.Helper()
	le, err := election.New(c.Client, election.Spec{Namespace: ns, ElectionID: "gate-example-leader", Identity: identity,
		Lock: election.LeaseLock}, election.WithTTL(2*time.Second), election.WithReleaseOnCancel(true))
	if err != nil {
		t.Fatal(err)
	}
	cand := &candidate{identity: identity, le: le, done: make(chan error, 1), fail: make(chan error)}
	Gate(le, func() (manager.Manager, error) {
		cand.managers.Add(1)
		mgr, err := ctrl.NewManager(c.Config, ctrl.Options{
			LeaderElection:         false, // the meshd election decides
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			// A controller's name is registered once per process: the
			// next term's manager registers it again.
			Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		})
		if err != nil {
			return nil, err
		}
		err = ctrl.NewControllerManagedBy(mgr).Named("stamp-" + identity).For(&corev1.ConfigMap{}).
			Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				if req.Namespace != ns {
					return reconcile.Result{}, nil
				}
				var cm corev1.ConfigMap
				if err := mgr.GetClient().Get(ctx, req.NamespacedName, &cm); err != nil {
					return reconcile.Result{}, client.IgnoreNotFound(err)
				}
				if cm.Annotations["example/reconciled-by"] == identity {
					return reconcile.Result{}, nil
				}
				if cm.Annotations == nil {
					cm.Annotations = map[string]string{}
				}
				cm.Annotations["example/reconciled-by"] = identity
				return reconcile.Result{}, mgr.GetClient().Update(ctx, &cm)
			}))
		if err != nil {
			return nil, err
		}
		// Count this manager as running while it runs; it fails when the
		// test says so, which stops the manager and ends the term.
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			live.enter()
			defer live.now.Add(-1)
			select {
			case <-ctx.Done():
				return nil
			case err := <-cand.fail:
				return err
			}
		})); err != nil {
			return nil, err
		}
		return mgr, nil
	})
	ctx, stop := context.WithCancel(context.Background())
	cand.stop = stop
	go func() { cand.done <- le.RunContext(ctx) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-cand.done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop", identity)
		}
	})
	return cand
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
		time.Sleep(50 * time.Millisecond)
	}
}

// Two processes gate a manager by one election on the real API server:
// only the leader's manager runs; when it fails, the term ends and the
// next term, whoever wins it, runs a new manager (one cannot be started
// twice); when the leader stops, the other takes over with a manager of
// its own. Never two managers at once.
func TestGateRunsANewManagerPerTerm(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	ctx := context.Background()
	var live running
	a := startCandidate(t, c, ns, "a", &live)
	eventually(t, 30*time.Second, func() error {
		if !a.le.IsLeader() {
			return errors.New("a does not lead")
		}
		return nil
	})
	b := startCandidate(t, c, ns, "b", &live)

	stampedBy := func(name, want string) func() error {
		return func() error {
			cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := cm.Annotations["example/reconciled-by"]; got != want {
				return fmt.Errorf("%s reconciled by %q, want %q", name, got, want)
			}
			return nil
		}
	}
	create := func(name string) {
		t.Helper()
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("one")
	eventually(t, 30*time.Second, stampedBy("one", "a"))

	// The leader's manager fails, twice: each failure ends a term, and the
	// candidates contend again; every new term runs a newly built manager,
	// since a manager cannot be started twice.
	leaderOf := func() *candidate {
		for _, cand := range []*candidate{a, b} {
			if cand.le.IsLeader() {
				return cand
			}
		}
		return nil
	}
	var leader *candidate
	for i := range 2 {
		builtBefore := a.managers.Load() + b.managers.Load()
		current := leaderOf()
		if current == nil {
			t.Fatal("nobody leads")
		}
		select {
		case current.fail <- fmt.Errorf("failure %d", i+1):
		case <-time.After(30 * time.Second):
			t.Fatalf("the manager of %s is not running", current.identity)
		}
		eventually(t, 30*time.Second, func() error {
			if n := a.managers.Load() + b.managers.Load(); n <= builtBefore {
				return fmt.Errorf("%d managers built, no new term yet", n)
			}
			if leader = leaderOf(); leader == nil {
				return errors.New("nobody leads")
			}
			return nil
		})
		name := fmt.Sprintf("term-%d", i+2)
		create(name)
		eventually(t, 30*time.Second, stampedBy(name, leader.identity))
	}
	if a.managers.Load() < 2 && b.managers.Load() < 2 {
		t.Errorf("no candidate led twice (managers built: a %d, b %d)", a.managers.Load(), b.managers.Load())
	}

	// The leader stops: the other takes over with a manager of its own.
	other := a
	if leader == a {
		other = b
	}
	leader.stop()
	select {
	case err := <-leader.done:
		if err != nil {
			t.Fatalf("%s: %v", leader.identity, err)
		}
		leader.done <- nil // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop", leader.identity)
	}
	create("three")
	eventually(t, 30*time.Second, stampedBy("three", other.identity))

	t.Logf("managers built: a %d, b %d; at most %d running at once", a.managers.Load(), b.managers.Load(), live.most.Load())
	if m := live.most.Load(); m != 1 {
		t.Errorf("at most %d managers ran at once, want 1", m)
	}
	if n := a.managers.Load() + b.managers.Load(); n < 4 {
		t.Errorf("managers built: a %d, b %d; want one per term, four terms", a.managers.Load(), b.managers.Load())
	}
}
