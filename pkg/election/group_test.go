package election

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

// TestGroupSharesOneWatcherAndOneRegistration: two prioritized elections and
// a per-revision one in a group: one list of the default-revision webhook,
// metrics registered once, every election leads, and Run returns after all
// have released their locks.
func TestGroupSharesOneWatcherAndOneRegistration(t *testing.T) {
	client := kubetest.NewClientset()
	reg := prometheus.NewRegistry()
	g, err := NewGroup(client, WithTTL(2*time.Second), WithPrometheus(reg), WithEvents(client))
	if err != nil {
		t.Fatal(err)
	}
	specs := []Spec{
		{Namespace: testNS, ElectionID: NamespaceController, Identity: "a"},
		{Namespace: testNS, ElectionID: StatusController, Identity: "a", Lock: LeaseLock},
		{Namespace: testNS, ElectionID: GatewayDeploymentController, Identity: "a", PerRevision: true},
	}
	for _, s := range specs {
		le, err := g.New(s)
		if err != nil {
			t.Fatal(err)
		}
		le.Add(func(ctx context.Context) error { <-ctx.Done(); return nil })
	}
	if _, err := New(client, specs[0], WithPrometheus(reg)); err == nil || !strings.Contains(err.Error(), "one Group") {
		t.Fatalf("a standalone election on the group's registerer: %v, want an error pointing to Group", err)
	}
	if _, err := g.New(specs[0], WithPrometheus(prometheus.NewRegistry())); err == nil {
		t.Fatal("WithPrometheus accepted by Group.New")
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	eventually(t, "every election to lead", func() bool {
		for _, le := range g.members() {
			if !le.IsLeader() {
				return false
			}
		}
		return g.Synced()
	})
	if n := series(t, reg, "meshd_election_leader"); n != 3 {
		t.Fatalf("meshd_election_leader has %d series, want 3", n)
	}
	if got := strings.Join(g.Running(), ","); got != "istio-namespace-controller-election,istio-status-leader,istio-gateway-deployment-default" {
		t.Fatalf("Running() = %s", got)
	}
	lists := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "mutatingwebhookconfigurations" {
			lists++
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if lists != 1 {
		t.Fatalf("%d lists of the webhook, want one shared watcher", lists)
	}
	if len(g.Running()) != 0 {
		t.Fatalf("still running after Run returned: %v", g.Running())
	}
	if h := lockHolder(t, client, NamespaceController); h.HolderIdentity != "" {
		t.Fatalf("lock still held by %q after Run returned", h.HolderIdentity)
	}
	if err := g.Run(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Run: %v", err)
	}
	if _, err := g.New(Spec{Namespace: testNS, ElectionID: IngressController}); err == nil {
		t.Fatal("New accepted after Run")
	}
}

func TestNewReportsEveryProblemAtOnce(t *testing.T) {
	_, err := New(nil, Spec{Namespace: "Bad NS", Revision: "Not_A_Revision", Lock: ConfigMapLock, PerRevision: true, Remote: true},
		WithTTL(time.Millisecond), WithStopTimeout(-time.Second), withRunBackoff(0, 0), withReleaseYieldStep(-time.Millisecond), WithDefaultLock("etcd"),
		WithRevisionWebhook("Bad Name", "bad label!"))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`invalid namespace "Bad NS"`, "election ID must not be empty", `invalid revision "Not_A_Revision"`,
		"per-revision election needs a Lease", "Remote applies only to prioritized", "ttl 1ms",
		"stop timeout -1s", "run back-off", "release yield step -1ms", `default lock kind "etcd"`, `webhook name "Bad Name"`,
		`revision label "bad label!"`, "client is required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, err := NewGroup(nil, WithTTL(time.Millisecond)); err == nil || !strings.Contains(err.Error(), "ttl") {
		t.Fatalf("NewGroup: %v", err)
	}
}

// TestTheEnvironmentIsIgnored: the library reads no environment variable.
// With every election setting of the environment set against the defaults,
// an election behaves as the defaults say.
func TestTheEnvironmentIsIgnored(t *testing.T) {
	for k, v := range map[string]string{
		"ENABLE_LEADER_ELECTION": "false", "PRIORITIZED_LEADER_ELECTION_LOCK": "lease", "LEADER_ELECTION_TTL": "5s",
		"PRIORITIZED_LEADER_ELECTION": "false", "LEADER_ELECTION_WATCH": "false", "REVISION_LABEL": "x",
	} {
		t.Setenv(k, v)
	}
	client := kubetest.NewClientset()
	le := mustElection(t)(NewLeaderElection(testNS, "a", IngressController, "stable", client))
	in := start(t, le)
	eventually(t, "a to lead", in.isRunning)
	rec := lockHolder(t, client, IngressController) // a ConfigMap lock
	if rec.HolderIdentity != "a" || rec.LeaseDurationSeconds != 30 {
		t.Fatalf("record %+v, want a's ConfigMap lock with the default 30s lease", rec)
	}
	if !le.prioritized {
		t.Fatal("not prioritized")
	}
}

// series counts the series of the metric family name in reg.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}

// TestDefaultLockOption: the istiod-style constructors that name no lock
// kind take it from WithDefaultLock, not from the environment.
func TestDefaultLockOption(t *testing.T) {
	t.Setenv("PRIORITIZED_LEADER_ELECTION_LOCK", "configmap")
	client := kubetest.NewClientset()
	le := mustElection(t)(NewLeaderElectionMulticluster(testNS, "a", NamespaceController, "stable", true, client,
		WithDefaultLock(LeaseLock), WithDefaultWatcher(defaultwatch.NewStatic(""))))
	in := start(t, le)
	eventually(t, "a to lead", in.isRunning)
	lease, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), NamespaceController, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no Lease lock: %v", err)
	}
	if *lease.Spec.HolderIdentity != "a" || le.Status().Lock != LeaseLock || le.spec.Lock != LeaseLock {
		t.Fatalf("lease holder %q, status %+v", *lease.Spec.HolderIdentity, le.Status())
	}
	// A Spec that names its kind keeps it: the option, given as a
	// program-wide default, does not apply; given for this election alone,
	// it is refused.
	spec := Spec{Namespace: testNS, ElectionID: IngressController, Lock: ConfigMapLock}
	cm := mustElection(t)(New(client, spec, Defaults(WithDefaultLock(LeaseLock)),
		WithDefaultWatcher(defaultwatch.NewStatic(""))))
	if cm.spec.Lock != ConfigMapLock {
		t.Fatalf("lock = %s", cm.spec.Lock)
	}
	if _, err := New(client, spec, WithDefaultLock(LeaseLock)); err == nil || !strings.Contains(err.Error(), "WithDefaultLock does not apply") {
		t.Fatalf("WithDefaultLock beside a Spec that names its lock: err %v, want it refused by name", err)
	}
}
