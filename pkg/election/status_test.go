package election

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/election/coordinated"
	"github.com/meshd-io/meshd/pkg/revisions"
)

func TestStatusOfACoordinatedElection(t *testing.T) {
	client := kubetest.NewClientset()
	le, err := New(client, Spec{Namespace: testNS, ElectionID: "coord", Identity: "a", Revision: "stable", Mode: Coordinated},
		WithTTL(2*time.Second), WithDefaultWatcher(revisions.NewStaticDefaultWatcher("")))
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
		WithDefaultWatcher(revisions.NewStaticDefaultWatcher("")))
	if err != nil {
		t.Fatal(err)
	}
	if st := le.Status(); st.Mode != Racing || st.Strategy != "" || st.PreferredHolder != "" {
		t.Fatalf("status = %+v", st)
	}
}
