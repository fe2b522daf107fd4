package election

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testNS = "istio-system"

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// instance runs one election in the background and counts its terms.
type instance struct {
	le      *LeaderElection
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	running bool
	terms   int
}

func start(t *testing.T, le *LeaderElection) *instance {
	t.Helper()
	in := &instance{le: le, stop: make(chan struct{}), done: make(chan struct{})}
	le.AddRunFunction(func(stop <-chan struct{}) {
		in.mu.Lock()
		in.running = true
		in.terms++
		in.mu.Unlock()
		<-stop
		in.mu.Lock()
		in.running = false
		in.mu.Unlock()
	})
	go func() { defer close(in.done); le.Run(in.stop) }()
	t.Cleanup(in.shutdown)
	return in
}

func (in *instance) isRunning() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.running
}

func (in *instance) shutdown() {
	select {
	case <-in.stop:
	default:
		close(in.stop)
	}
	<-in.done
}

func mustElection(t *testing.T) func(*LeaderElection, error) *LeaderElection {
	return func(le *LeaderElection, err error) *LeaderElection {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return le
	}
}

func lockHolder(t *testing.T, c *fake.Clientset, name string) resourcelock.Record {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps(testNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return resourcelock.Record{}
	}
	rec, err := resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey]))
	if err != nil {
		t.Fatal(err)
	}
	return *rec
}

func TestDisabledRunsAtOnceAndTouchesNothing(t *testing.T) {
	client := kubetest.NewClientset()
	le := mustElection(t)(NewLeaderElection(testNS, "a", IngressController, "stable", client, WithEnabled(false)))
	ctxFnStopped := make(chan struct{})
	le.Add(func(ctx context.Context) error { <-ctx.Done(); close(ctxFnStopped); return nil })
	in := start(t, le)
	eventually(t, "run functions to start", in.isRunning)
	if !le.IsLeader() {
		t.Fatal("IsLeader false with elections disabled")
	}
	in.shutdown()
	<-ctxFnStopped
	if in.isRunning() {
		t.Fatal("Run returned before its run function stopped")
	}
	if n := len(client.Actions()); n != 0 {
		t.Fatalf("disabled election made %d API calls: %v", n, kubetest.Verbs(client))
	}
}

func TestDefaultRevisionTakesOverAndDefaultChangeMovesLeadership(t *testing.T) {
	client := kubetest.NewClientset()
	watcher := defaultwatch.NewStatic("")
	opts := []Option{WithTTL(2 * time.Second), WithDefaultWatcher(watcher)}
	canary := start(t, mustElection(t)(NewLeaderElection(testNS, "canary-1", IngressController, "canary", client, opts...)))
	eventually(t, "canary to lead", canary.isRunning)

	stable := start(t, mustElection(t)(NewLeaderElection(testNS, "stable-1", IngressController, "stable", client, opts...)))
	time.Sleep(300 * time.Millisecond) // no default known: nobody may steal
	if stable.isRunning() || !canary.isRunning() {
		t.Fatal("leadership moved although no default revision is known")
	}

	watcher.(*defaultwatch.Static).SetDefault("stable")
	eventually(t, "stable to take over", func() bool { return stable.isRunning() && !canary.isRunning() })
	if rec := lockHolder(t, client, IngressController); rec.HolderIdentity != "stable-1" || rec.HolderKey != "stable" {
		t.Fatalf("record = %+v", rec)
	}

	watcher.(*defaultwatch.Static).SetDefault("canary")
	eventually(t, "canary to take back", func() bool { return canary.isRunning() && !stable.isRunning() })
	if got := canary.le.cycle.Load(); got != 2 {
		t.Fatalf("canary cycle = %d, want 2 (lost once, re-contended)", got)
	}
	if rec := lockHolder(t, client, IngressController); rec.LeaderTransitions != 2 {
		t.Fatalf("transitions = %d, want 2", rec.LeaderTransitions)
	}
}

func TestLocalTakesOverFromRemote(t *testing.T) {
	client := kubetest.NewClientset()
	opts := []Option{WithTTL(2 * time.Second), WithDefaultWatcher(defaultwatch.NewStatic(""))}
	remote := start(t, mustElection(t)(NewLeaderElectionMulticluster(testNS, "remote-1", NamespaceController, "stable", true, client, opts...)))
	eventually(t, "remote to lead", remote.isRunning)
	if rec := lockHolder(t, client, NamespaceController); rec.HolderKey != "^stable" {
		t.Fatalf("remote key = %q", rec.HolderKey)
	}
	local := start(t, mustElection(t)(NewLeaderElectionMulticluster(testNS, "local-1", NamespaceController, "stable", false, client, opts...)))
	eventually(t, "local to take over", func() bool { return local.isRunning() && !remote.isRunning() })
	time.Sleep(1200 * time.Millisecond) // a few retry periods: the remote must not take it back
	if !local.isRunning() || remote.isRunning() {
		t.Fatal("remote took the lock back from local")
	}
}

func TestPerRevisionElectionsAreIndependentAndNeverSteal(t *testing.T) {
	client := kubetest.NewClientset()
	opts := []Option{WithTTL(2 * time.Second)}
	a := start(t, mustElection(t)(NewPerRevisionLeaderElection(testNS, "a", GatewayDeploymentController, "stable", client, opts...)))
	b := start(t, mustElection(t)(NewPerRevisionLeaderElection(testNS, "b", GatewayDeploymentController, "canary", client, opts...)))
	eventually(t, "one leader per revision", func() bool { return a.isRunning() && b.isRunning() })
	c := start(t, mustElection(t)(NewPerRevisionLeaderElection(testNS, "c", GatewayDeploymentController, "stable", client, opts...)))
	time.Sleep(1200 * time.Millisecond)
	if c.isRunning() || !a.isRunning() {
		t.Fatal("a second instance of a revision took the per-revision lock")
	}
	for rev, holder := range map[string]string{"stable": "a", "canary": "b"} {
		lease, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), GatewayDeploymentController+"-"+rev, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := *lease.Spec.HolderIdentity; got != holder {
			t.Fatalf("lease %s holder = %q, want %q", lease.Name, got, holder)
		}
	}
	a.shutdown()
	eventually(t, "c to take over after a's release", c.isRunning)
}

func TestLeaseElectionWritesKeyAnnotation(t *testing.T) {
	client := kubetest.NewClientset()
	le := mustElection(t)(NewLeaseLeaderElection(testNS, "a", StatusController, "canary", client,
		WithTTL(2*time.Second), WithDefaultWatcher(defaultwatch.NewStatic(""))))
	in := start(t, le)
	eventually(t, "lead", in.isRunning)
	lease, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), StatusController, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lease.Annotations[resourcelock.LeaseHolderKeyAnnotation]; got != "canary" {
		t.Fatalf("holder key annotation = %q", got)
	}
	st := le.Status()
	if st.Lock != LeaseLock || st.Name != StatusController || !st.Leader || st.Holder != "a" || st.HolderKey != "canary" || st.Cycle != 1 {
		t.Fatalf("status = %+v", st)
	}
}

func TestDefaultsAndValidation(t *testing.T) {
	client := fake.NewClientset()
	le := mustElection(t)(NewLeaderElection(testNS, "", IngressController, "", client,
		WithDefaultWatcher(defaultwatch.NewStatic(""))))
	host, _ := os.Hostname()
	// <hostname>_<8 hex digits>, drawn for this election's own Shared.
	suffix, ok := strings.CutPrefix(le.Identity(), host+"_")
	if !ok || len(suffix) != 8 || strings.Trim(suffix, "0123456789abcdef") != "" {
		t.Fatalf("identity = %q, want %s_<8 hex digits>", le.Identity(), host)
	}
	// Elections given one Shared have one identity; another draws anew.
	shared := NewShared()
	a := mustElection(t)(NewLeaderElection(testNS, "", IngressController, "", client, WithShared(shared)))
	b := mustElection(t)(NewPerRevisionLeaderElection(testNS, "", IngressController, "", client, WithShared(shared)))
	if a.Identity() != shared.Identity() || b.Identity() != shared.Identity() || a.Identity() == le.Identity() {
		t.Fatalf("identities %q and %q with one Shared (%q), %q without", a.Identity(), b.Identity(), shared.Identity(), le.Identity())
	}
	if le.candidate.Revision != "default" {
		t.Fatalf("revision = %q", le.candidate.Revision)
	}
	_, err := NewLeaderElection("Bad NS", "a", "", "Not_A_Revision", nil)
	if err == nil {
		t.Fatal("invalid election accepted")
	}
	for _, want := range []string{"election ID must not be empty", "invalid revision", "client is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := NewLeaderElection("Bad NS", "a", IngressController, "x", client); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Fatalf("bad namespace: %v", err)
	}
	if _, err := NewLeaderElection(testNS, "a", IngressController, "x", client, WithTTL(500*time.Millisecond)); err == nil {
		t.Fatal("ttl 500ms accepted (the record stores whole seconds)")
	} else if !strings.Contains(err.Error(), "ttl") {
		t.Fatalf("ttl error does not name the ttl: %v", err)
	}
}
