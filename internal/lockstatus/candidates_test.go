package lockstatus

import (
	"context"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"go.uber.org/goleak"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

const ns = "istio-system"

var now = time.Date(2026, 1, 2, 3, 4, 30, 0, time.UTC)

// leaseCandidate is a LeaseCandidate as a Publisher writes it, with a
// 15 s lease (so live while renewed within 60 s) renewed age ago.
func leaseCandidate(lease, identity, key, version string, age time.Duration) *coordinationv1beta1.LeaseCandidate {
	renew := metav1.NewMicroTime(now.Add(-age))
	return &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: coordinated.CandidateName(lease, identity), Namespace: ns, Annotations: map[string]string{
			coordinated.IdentityAnnotation:      identity,
			coordinated.HolderKeyAnnotation:     key,
			coordinated.PreemptsAnnotation:      "true",
			coordinated.LeaseDurationAnnotation: strconv.Itoa(15),
		}},
		Spec: coordinationv1beta1.LeaseCandidateSpec{LeaseName: lease, Strategy: coordinated.Strategy,
			BinaryVersion: version, EmulationVersion: version, RenewTime: &renew},
	}
}

func defaultWebhook(rev string) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name: "istio-revision-tag-default", Labels: map[string]string{"istio.io/rev": rev}}}
}

// ranking is the candidates as "rank identity" strings, for exact comparison.
func ranking(cs []Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = strconv.Itoa(c.Rank) + " " + c.Identity
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestListCandidatesRanksLikeTheCoordinator(t *testing.T) {
	tests := []struct {
		name     string
		webhook  runtime.Object
		wantDef  string
		wantRank []string
	}{
		{"canary is the default", defaultWebhook("canary"), "canary",
			[]string{"1 canary-1", "2 canary-remote-1", "3 stable-1", "4 stable-remote-1", "0 canary-stale", "0 unannounced"}},
		{"stable is the default", defaultWebhook("stable"), "stable",
			[]string{"1 stable-1", "2 stable-remote-1", "3 canary-1", "4 canary-remote-1", "0 canary-stale", "0 unannounced"}},
		{"no default known: local first, then version, then name", nil, "",
			[]string{"1 stable-1", "2 canary-1", "3 stable-remote-1", "4 canary-remote-1", "0 canary-stale", "0 unannounced"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const lease = "istio-namespace-controller-election"
			objs := []runtime.Object{
				leaseCandidate(lease, "stable-1", "stable", "1.0.0", time.Second),
				leaseCandidate(lease, "stable-remote-1", "^stable", "1.0.0", 2*time.Second),
				leaseCandidate(lease, "canary-1", "canary", "1.1.0", 3*time.Second),
				leaseCandidate(lease, "canary-remote-1", "^canary", "1.1.0", 4*time.Second),
				leaseCandidate(lease, "canary-stale", "canary", "1.0.0", 61*time.Second),
				leaseCandidate("other", "stable-1", "stable", "1.0.0", time.Second),
			}
			unannounced := leaseCandidate(lease, "unannounced", "stable", "1.0.0", time.Second)
			delete(unannounced.Annotations, coordinated.LeaseDurationAnnotation) // never live
			objs = append(objs, unannounced)
			if tt.webhook != nil {
				objs = append(objs, tt.webhook)
			}
			c, err := ListCandidates(context.Background(), fake.NewClientset(objs...), ns, now)
			if err != nil {
				t.Fatal(err)
			}
			if c.DefaultRevision != tt.wantDef || c.Warning != "" {
				t.Fatalf("default %q, warning %q; want %q and none", c.DefaultRevision, c.Warning, tt.wantDef)
			}
			if got := ranking(c.ByLease[lease]); !equal(got, tt.wantRank) {
				t.Fatalf("ranking %q, want %q", got, tt.wantRank)
			}
			if got := ranking(c.ByLease["other"]); !equal(got, []string{"1 stable-1"}) {
				t.Fatalf("other lease: %q", got)
			}
			first := c.ByLease[lease][len(tt.wantRank)-2] // canary-stale
			if first.Live || first.Revision != "canary" || first.Remote || first.BinaryVersion != "1.0.0" ||
				!first.RenewTime.Equal(now.Add(-61*time.Second)) || first.Name != coordinated.CandidateName(lease, "canary-stale") {
				t.Fatalf("stale candidate: %+v", first)
			}
		})
	}
}

func TestListCandidatesWithoutTheAPI(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"plain API server", apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leasecandidates"}, ""), false},
		{"no RBAC", apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leasecandidates"}, "", nil), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(leaseCandidate("l", "a", "stable", "1.0.0", 0))
			client.PrependReactor("list", "leasecandidates", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.err
			})
			c, err := ListCandidates(context.Background(), client, ns, now)
			if (err != nil) != tt.wantErr || len(c.ByLease) != 0 {
				t.Fatalf("candidates %v, error %v; want error: %t", c.ByLease, err, tt.wantErr)
			}
			if verbs := actionVerbs(client.Actions()); !equal(verbs, []string{"list leasecandidates"}) {
				t.Fatalf("API calls %q, want a single list", verbs)
			}
		})
	}
}

func TestListCandidatesDefaultUnreadable(t *testing.T) {
	client := fake.NewClientset(leaseCandidate("l", "remote", "^canary", "1.0.0", 0), leaseCandidate("l", "local", "stable", "1.0.0", 0))
	client.PrependReactor("get", "mutatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "mutatingwebhookconfigurations"}, "x", nil)
	})
	c, err := ListCandidates(context.Background(), client, ns, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.Warning == "" || c.DefaultRevision != "" {
		t.Fatalf("warning %q, default %q", c.Warning, c.DefaultRevision)
	}
	if got := ranking(c.ByLease["l"]); !equal(got, []string{"1 local", "2 remote"}) {
		t.Fatalf("ranking %q", got)
	}
}

func TestListCandidatesNoneSkipsTheCache(t *testing.T) {
	client := fake.NewClientset()
	c, err := ListCandidates(context.Background(), client, ns, now)
	if err != nil || len(c.ByLease) != 0 {
		t.Fatalf("candidates %v, error %v", c.ByLease, err)
	}
	if verbs := actionVerbs(client.Actions()); !equal(verbs, []string{"list leasecandidates"}) {
		t.Fatalf("API calls %q, want a single list", verbs)
	}
}

func TestListFillsCoordinationAndAttach(t *testing.T) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: ns,
		Annotations: map[string]string{lockmeta.LeasePreferredHolderKeyAnnotation: "canary"}}}
	resourcelock.ApplyRecordToLease(resourcelock.Record{HolderIdentity: "x", HolderKey: "stable", LeaseDurationSeconds: 15}, lease)
	strategy, preferred := coordinated.Strategy, "y"
	lease.Spec.Strategy, lease.Spec.PreferredHolder = &strategy, &preferred
	plain := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}}
	locks, err := List(context.Background(), fake.NewClientset(lease, plain), ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 2 {
		t.Fatalf("locks %+v", locks)
	}
	got, other := locks[0], locks[1]
	if got.Strategy != "meshd.io/prioritized" || got.PreferredHolder != "y" || got.PreferredHolderKey != "canary" {
		t.Fatalf("coordinated lock %+v", got)
	}
	if other.Strategy != "" || other.PreferredHolder != "" || other.PreferredHolderKey != "" {
		t.Fatalf("plain lock %+v", other)
	}
	Attach(locks, Candidates{ByLease: map[string][]Candidate{"l": {{Name: "x", Rank: 1}}}})
	if len(locks[0].Candidates) != 1 || locks[1].Candidates != nil {
		t.Fatalf("attached: %+v", locks)
	}
}

func actionVerbs(actions []k8stesting.Action) []string {
	out := make([]string, len(actions))
	for i, a := range actions {
		out[i] = a.GetVerb() + " " + a.GetResource().Resource
	}
	return out
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
