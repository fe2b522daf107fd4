package election

import (
	"context"
	"testing"
	"time"

	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

func TestStatusOfACoordinatedElection(t *testing.T) {
	client := kubetest.NewClientset()
	le, err := New(client, Spec{Namespace: testNS, ElectionID: "coord", Identity: "a", Revision: "stable", Mode: Coordinated},
		WithTTL(2*time.Second), WithDefaultWatcher(defaultwatch.NewStatic("")))
	if err != nil {
		t.Fatal(err)
	}
	if st := le.Status(); st.Mode != Coordinated || st.Strategy != "meshd.io/prioritized" || st.PreferredHolder != "" {
		t.Fatalf("status before the start = %+v", st)
	}
	in := start(t, le)
	eventually(t, "a vacant coordinated lease taken by its only candidate", in.isRunning)
	// A coordinator names another (not live) candidate: the holder keeps the
	// lock, and Status shows the preference from the Lease it watches.
	lease, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), "coord", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := coordinated.CandidateName("coord", "b")
	lease.Spec.PreferredHolder = &other
	if _, err := client.CoordinationV1().Leases(testNS).Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the preferred holder in Status", func() bool { return le.Status().PreferredHolder == other })
	if st := le.Status(); st.Holder != coordinated.CandidateName("coord", "a") || !st.Leader {
		t.Fatalf("status = %+v", st)
	}
}

func TestStatusOfARacingElection(t *testing.T) {
	le, err := New(kubetest.NewClientset(), Spec{Namespace: testNS, ElectionID: "race", Identity: "a"},
		WithDefaultWatcher(defaultwatch.NewStatic("")))
	if err != nil {
		t.Fatal(err)
	}
	if st := le.Status(); st.Mode != Racing || st.Strategy != "" || st.PreferredHolder != "" {
		t.Fatalf("status = %+v", st)
	}
}

func TestOlderCandidateOrdersAsKubernetes(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.Unix(sec, 0) }
	cand := func(name, emu, bin string, created int64) *coordinationv1beta1.LeaseCandidate {
		return &coordinationv1beta1.LeaseCandidate{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created)},
			Spec:       coordinationv1beta1.LeaseCandidateSpec{EmulationVersion: emu, BinaryVersion: bin},
		}
	}
	for _, tc := range []struct {
		a, b *coordinationv1beta1.LeaseCandidate
		want bool
	}{
		{cand("a", "1.34.0", "1.36.0", 5), cand("b", "1.35.0", "1.35.0", 1), true},
		{cand("a", "1.35.0", "1.36.0", 1), cand("b", "1.35.0", "1.35.0", 5), false},
		{cand("a", "1.35.0", "1.35.0", 1), cand("b", "1.35.0", "1.35.0", 5), true},
		{cand("b", "1.35.0", "1.35.0", 1), cand("a", "1.35.0", "1.35.0", 1), false},
	} {
		if got := olderCandidate(tc.a, tc.b); got != tc.want {
			t.Errorf("olderCandidate(%s %s/%s, %s %s/%s) = %v, want %v", tc.a.Name, tc.a.Spec.EmulationVersion, tc.a.Spec.BinaryVersion,
				tc.b.Name, tc.b.Spec.EmulationVersion, tc.b.Spec.BinaryVersion, got, tc.want)
		}
	}
}
