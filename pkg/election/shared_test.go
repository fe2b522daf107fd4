package election

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/election/knobs"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

// webhookResource names the resource of the default-revision webhook in
// a fake clientset's recorded requests.
const webhookResource = "mutatingwebhookconfigurations"

// TestStandaloneElectionsAndGroupsShareOneDefaultWatch: ten standalone
// prioritized elections given one Shared and a group of two built with it,
// on one client, read the default revision through one watch of the webhook
// and one lock watch per kind; both stop when the last election returns.
func TestStandaloneElectionsAndGroupsShareOneDefaultWatch(t *testing.T) {
	client := kubetest.NewClientset()
	shared := NewShared()
	var elections []*LeaderElection
	for i := range 10 {
		le, err := New(client, Spec{Namespace: testNS, ElectionID: fmt.Sprintf("e%d", i), Identity: "a", Lock: LeaseLock},
			WithTTL(2*time.Second), WithShared(shared))
		if err != nil {
			t.Fatal(err)
		}
		elections = append(elections, le)
	}
	g, err := NewGroup(client, WithTTL(2*time.Second), WithShared(shared))
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
	runAll(t, elections[:10], []*Group{g}, func() {
		if got := shared.running(); got != (knobs.Activity{LockWatches: 1, DefaultWatches: 1}) {
			t.Errorf("running %+v, want one lock watch and one default-revision watch", got)
		}
		// 12 elections: one list and one watch of the webhook.
		kubetest.WaitForVerbs(t, client, webhookResource, map[string]int{"list": 1, "watch": 1})
	})
	if got := shared.running(); got != (knobs.Activity{}) {
		t.Errorf("running %+v after every election returned, want nothing", got)
	}
}

// TestElectionsShareOnlyWhatTheyAreGiven: two groups on one client, and
// two standalone elections without WithShared, build independent worlds:
// each opens watches of its own, none sees another's Shared running, and
// each group's elections share one default identity.
func TestElectionsShareOnlyWhatTheyAreGiven(t *testing.T) {
	client := kubetest.NewClientset()
	var groups []*Group
	for range 2 {
		g, err := NewGroup(client, WithTTL(2*time.Second), WithDefaultLock(LeaseLock))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := g.New(Spec{Namespace: testNS, ElectionID: fmt.Sprintf("g%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		groups = append(groups, g)
	}
	if a, b := groups[0].shared, groups[1].shared; a == b {
		t.Fatal("two groups share one Shared")
	}
	for _, g := range groups {
		els := g.members()
		if els[0].Identity() != g.shared.Identity() || els[1].Identity() != els[0].Identity() {
			t.Errorf("a group's elections have identities %q, %q; want its Shared's %q", els[0].Identity(), els[1].Identity(), g.shared.Identity())
		}
	}
	if groups[0].shared.Identity() == groups[1].shared.Identity() {
		t.Error("two groups drew one identity")
	}
	var standalone []*LeaderElection
	for range 2 {
		le, err := New(client, Spec{Namespace: testNS, ElectionID: "s", Lock: LeaseLock}, WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		standalone = append(standalone, le)
	}
	if standalone[0].Identity() == standalone[1].Identity() {
		t.Error("two standalone elections without a Shared drew one identity")
	}
	runAll(t, standalone, groups, func() {
		for i, g := range groups {
			if got := g.shared.running(); got != (knobs.Activity{LockWatches: 1, DefaultWatches: 1}) {
				t.Errorf("group %d runs %+v, want one lock watch and one default-revision watch", i, got)
			}
		}
		// Two groups and two standalone elections: four worlds, four
		// watches of the webhook.
		kubetest.WaitForVerbs(t, client, webhookResource, map[string]int{"list": 4, "watch": 4})
	})
	for i, g := range groups {
		if got := g.shared.running(); got != (knobs.Activity{}) {
			t.Errorf("group %d runs %+v after Run returned", i, got)
		}
	}
}

// runAll runs the standalone elections and the groups (whose elections must
// not be among standalone) until every election of both knows its leader
// and every group has synced, calls during, then stops them all and waits
// for them.
func runAll(t *testing.T, standalone []*LeaderElection, groups []*Group, during func()) {
	t.Helper()
	all := slices.Clone(standalone)
	for _, g := range groups {
		all = append(all, g.members()...)
	}
	for _, le := range all {
		le.Add(func(ctx context.Context) error { <-ctx.Done(); return nil })
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, le := range standalone {
		wg.Go(func() { _ = le.RunContext(ctx) })
	}
	for _, g := range groups {
		wg.Go(func() { _ = g.Run(ctx) })
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, le := range all {
				t.Logf("%s: %+v", le.electionID(), le.Status())
			}
			for i, g := range groups {
				t.Logf("group %d synced %v, running %+v", i, g.Synced(), g.shared.running())
			}
		}
	})
	eventually(t, "every election to know its leader", func() bool {
		for _, le := range all {
			if le.Status().Holder == "" {
				return false
			}
		}
		for _, g := range groups {
			if !g.Synced() {
				return false
			}
		}
		return true
	})
	defer wg.Wait()
	defer cancel()
	during()
}

func TestSharedIsRefusedWhereItDoesNotApply(t *testing.T) {
	client := kubetest.NewClientset()
	spec := Spec{Namespace: testNS, ElectionID: "x"}
	if _, err := New(client, spec, WithShared(nil)); err == nil || !strings.Contains(err.Error(), "WithShared") {
		t.Errorf("WithShared(nil): err %v, want one naming WithShared", err)
	}
	if _, err := New(client, spec, WithShared(&Shared{})); err == nil || !strings.Contains(err.Error(), "NewShared") {
		t.Errorf("WithShared of a zero Shared: err %v, want one naming NewShared", err)
	}
	if _, err := NewGroup(client, WithShared(nil)); err == nil {
		t.Error("NewGroup accepted WithShared(nil)")
	}
	g, err := NewGroup(client)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.New(spec, WithShared(NewShared())); err == nil || !strings.Contains(err.Error(), "NewGroup") {
		t.Errorf("Group.New with WithShared: err %v, want one pointing to NewGroup", err)
	}
	if _, err := g.New(spec, WithShared(g.shared)); err != nil {
		t.Errorf("Group.New with the group's own Shared: %v", err)
	}
}
