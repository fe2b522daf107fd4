package features_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/features"
)

// TestElectionOptionsFollowTheEnvironment: with ENABLE_LEADER_ELECTION=false
// an election that opted in to the environment runs its work at once and
// touches no lock, while one that did not still takes its lock.
func TestElectionOptionsFollowTheEnvironment(t *testing.T) {
	t.Setenv("ENABLE_LEADER_ELECTION", "false")
	if features.EnableLeaderElection.Get() {
		t.Fatal("ENABLE_LEADER_ELECTION was read before this test set it")
	}
	spec := election.Spec{Namespace: "istio-system", ElectionID: election.IngressController, Identity: "a"}
	cases := []struct {
		name       string
		opts       []election.Option
		wantLocked bool
	}{
		{"library defaults", nil, true},
		{"opted in", features.ElectionOptions(), false},
		{"opted in, then overridden", append(features.ElectionOptions(), election.WithEnabled(true)), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := kubetest.NewClientset()
			le, err := election.New(client, spec, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			le.Add(func(context.Context) error { cancel(); return nil }) // ends Run once the work has started
			if err := le.RunContext(ctx); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != context.Canceled {
				t.Fatal("the work never started")
			}
			if locked := len(client.Actions()) > 0; locked != tc.wantLocked {
				t.Fatalf("API calls %v, want some: %v", kubetest.Verbs(client), tc.wantLocked)
			}
		})
	}
}
