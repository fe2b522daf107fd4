package election

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/election/priority"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func TestElectionIDsThatAreNotObjectNamesAreRejected(t *testing.T) {
	client := fake.NewClientset()
	noDefault := WithDefaultWatcher(defaultwatch.NewStatic(""))
	type ctor func(id string) (*LeaderElection, error)
	ctors := map[string]ctor{
		"configmap": func(id string) (*LeaderElection, error) {
			return NewLeaderElection(testNS, "a", id, "stable", client, noDefault)
		},
		"lease": func(id string) (*LeaderElection, error) {
			return NewLeaseLeaderElection(testNS, "a", id, "stable", client, noDefault)
		},
		"per-revision": func(id string) (*LeaderElection, error) {
			return NewPerRevisionLeaderElection(testNS, "a", id, "stable", client)
		},
	}
	for _, id := range []string{
		"Istio_Leader", "istio/leader", "-istio-leader", "istio..leader", "istio leader",
		"ISTIO-LEADER", "istio-leader\x00", "ístio-leader", strings.Repeat("a", 254),
	} {
		for kind, newElection := range ctors {
			le, err := newElection(id)
			if err == nil || le != nil {
				t.Errorf("%s election %.20q: accepted", kind, id)
				continue
			}
			if !strings.Contains(err.Error(), "invalid lock name") {
				t.Errorf("%s election %.20q: error %q does not say the lock name is invalid", kind, id, err)
			}
		}
	}
	// The lock name is what must be valid: "x-" is not a name, but the
	// per-revision Lease "x--stable" is.
	if _, err := ctors["lease"]("istio-leader-"); err == nil {
		t.Error(`lease election "istio-leader-": accepted`)
	}
	if _, err := ctors["per-revision"]("istio-leader-"); err != nil {
		t.Errorf(`per-revision election "istio-leader-" (Lease istio-leader--stable): %v`, err)
	}
	// A valid ID can still make a per-revision Lease name that is too long.
	id := strings.Repeat("a", 250)
	if _, err := NewLeaseLeaderElection(testNS, "a", id, "stable", client, noDefault); err != nil {
		t.Fatalf("a 250-character ID: %v", err)
	}
	if _, err := NewPerRevisionLeaderElection(testNS, "a", id, "stable", client); err == nil ||
		!strings.Contains(err.Error(), id+"-stable") {
		t.Fatalf("per-revision Lease name of 257 characters: %v", err)
	}
}

func TestTTLsThatCannotBeSplitAreRejected(t *testing.T) {
	client := fake.NewClientset()
	for _, ttl := range []time.Duration{-time.Second, time.Nanosecond, 999 * time.Millisecond} {
		_, err := NewLeaderElection(testNS, "a", IngressController, "stable", client, WithTTL(ttl),
			WithDefaultWatcher(defaultwatch.NewStatic("")))
		if err == nil || !strings.Contains(err.Error(), "ttl "+ttl.String()) || !strings.Contains(err.Error(), "LeaseDuration") {
			t.Errorf("ttl %v: %v; want an error naming the ttl and the lease duration", ttl, err)
		}
	}
	// ttl 0 comes from WithTTL(0), not the environment: it is invalid too.
	if _, err := NewLeaderElection(testNS, "a", IngressController, "stable", client, WithTTL(0),
		WithDefaultWatcher(defaultwatch.NewStatic(""))); err == nil {
		t.Error("ttl 0 accepted")
	}
}

// TestFractionalTTLIsWrittenRoundedUp: a ttl of 1.5s is a valid split (lease
// 1.5s, renew deadline 750ms, retry 375ms); the record says 2s.
func TestFractionalTTLIsWrittenRoundedUp(t *testing.T) {
	client := kubetest.NewClientset()
	le := mustElection(t)(NewLeaderElection(testNS, "a", IngressController, "stable", client, WithTTL(1500*time.Millisecond),
		WithDefaultWatcher(defaultwatch.NewStatic(""))))
	in := start(t, le)
	eventually(t, "lead", in.isRunning)
	cm, err := client.CoreV1().ConfigMaps(testNS).Get(context.Background(), IngressController, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := resourcelock.DecodeRecord([]byte(cm.Annotations[resourcelock.LeaderAnnotationKey]))
	if err != nil || rec.LeaseDurationSeconds != 2 {
		t.Fatalf("record %+v, %v; want leaseDurationSeconds 2", rec, err)
	}
}

// TestUnknownHolderKeysAreAnotherRevision: a key no meshd or istiod writes
// is read as some other revision: the default revision takes the lock from
// it, nobody else does, and it never makes the rule panic.
func TestUnknownHolderKeysAreAnotherRevision(t *testing.T) {
	keys := []string{"^", "^^stable", "stable/../canary", "STABLE", "stable ", "\x00", strings.Repeat("k", 10000), "☃", "^☃"}
	for _, key := range keys {
		for _, c := range []priority.Candidate{{Revision: "stable"}, {Revision: "stable", Remote: true}, {Revision: "canary"}} {
			for _, def := range []string{"", "stable", "canary", key} {
				got := priority.LocationPrioritizedComparison(key, c, def)
				holder := priority.ParseKey(key)
				want := false
				switch {
				case holder.Revision != c.Revision:
					want = def != "" && def == c.Revision
				default:
					want = !c.Remote && holder.Remote
				}
				if got != want {
					t.Errorf("holder key %.20q, candidate %+v, default %.20q: steal = %v, want %v", key, c, def, got, want)
				}
			}
		}
	}
	// In particular, a default named like the unknown key helps nobody.
	if priority.LocationPrioritizedComparison("STABLE", priority.Candidate{Revision: "stable"}, "STABLE") {
		t.Error("revision comparison is case-insensitive")
	}
}

func TestSessionsAreRejectedWhereTheyCannotBeSafe(t *testing.T) {
	client := fake.NewClientset()
	for _, c := range []struct {
		name string
		spec Spec
		opts []Option
		want string
	}{
		{"configmap lock", Spec{Namespace: testNS, ElectionID: "e", Lock: ConfigMapLock}, nil, "Lease lock"},
		{"prioritized default lock", Spec{Namespace: testNS, ElectionID: "e"}, nil, "Lease lock"},
		{"coordinated", Spec{Namespace: testNS, ElectionID: "e", Mode: Coordinated}, nil, "racing elections only"},
		{"no watch", Spec{Namespace: testNS, ElectionID: "e", Lock: LeaseLock}, []Option{WithWatch(false)}, "needs WithWatch(true)"},
	} {
		le, err := New(client, c.spec, append([]Option{WithSessions(true)}, c.opts...)...)
		if err == nil || le != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v; want one mentioning %q", c.name, err, c.want)
		}
	}
	if _, err := New(client, Spec{Namespace: testNS, ElectionID: "e", PerRevision: true}, WithSessions(true)); err != nil {
		t.Errorf("a per-revision election (a Lease) with sessions: %v", err)
	}
}
