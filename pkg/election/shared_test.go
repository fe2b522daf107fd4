package election

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// webhookRequests counts the clientset's lists and watches of webhooks.
func webhookRequests(c *fake.Clientset) map[string]int {
	out := map[string]int{}
	for _, a := range c.Actions() {
		if a.GetResource().Resource == "mutatingwebhookconfigurations" {
			out[a.GetVerb()]++
		}
	}
	return out
}

// TestStandaloneElectionsAndGroupsShareOneDefaultWatch: ten standalone
// prioritized elections and a group of two, on one client, read the default
// revision through one watch of the webhook and one shared lock watch per
// kind; both stop when the last election returns.
func TestStandaloneElectionsAndGroupsShareOneDefaultWatch(t *testing.T) {
	client := kubetest.NewClientset()
	var elections []*LeaderElection
	for i := range 10 {
		le, err := New(client, Spec{Namespace: testNS, ElectionID: fmt.Sprintf("e%d", i), Identity: "a", Lock: LeaseLock},
			WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		elections = append(elections, le)
	}
	g, err := NewGroup(client, WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		le, err := g.New(Spec{Namespace: testNS, ElectionID: fmt.Sprintf("g%d", i), Identity: "a", Lock: LeaseLock})
		if err != nil {
			t.Fatal(err)
		}
		elections = append(elections, le)
	}
	for _, le := range elections {
		le.Add(func(ctx context.Context) error { <-ctx.Done(); return nil })
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, le := range elections[:10] {
		wg.Go(func() { _ = le.RunContext(ctx) })
	}
	wg.Go(func() { _ = g.Run(ctx) })
	eventually(t, "every election to lead", func() bool {
		for _, le := range elections {
			if !le.IsLeader() {
				return false
			}
		}
		return g.Synced()
	})
	if got := revisions.SharedDefaultWatchers(); got != 1 {
		t.Errorf("%d default-revision watches run, want 1", got)
	}
	if got := resourcelock.SharedWatchHub().Watches(); got != 1 {
		t.Errorf("%d lock watches run, want 1", got)
	}
	if got := webhookRequests(client); got["list"] != 1 || got["watch"] != 1 {
		t.Errorf("12 elections sent %v for the webhook, want one list and one watch", got)
	}
	cancel()
	wg.Wait()
	if got := revisions.SharedDefaultWatchers(); got != 0 {
		t.Errorf("%d default-revision watches still run after every election returned", got)
	}
	if got := resourcelock.SharedWatchHub().Watches(); got != 0 {
		t.Errorf("%d lock watches still run after every election returned", got)
	}
}
