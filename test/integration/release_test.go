package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/election/testknobs"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// orderStep is the yield per class of the tests of the order in which
// candidates take a lock: longer than the default 15ms, so that the order
// they check holds on a loaded host too (the step's default is sized for
// the spread of watch delivery, which a loaded test host can exceed).
const orderStep = 200 * time.Millisecond

// A racing holder that stops hands its lock to whoever writes first. The
// candidates a better one outranks yield for a moment, so that the lock
// goes straight to the best candidate watching it and no lesser one leads
// in between (a remote instance, then a local one taking it back).
func TestReleasedLockGoesStraightToTheBestCandidate(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	client := cluster.Client
	setDefaultRevision(t, client, ns, "canary")
	spec := func(identity, revision string, remote bool) election.Spec {
		return election.Spec{Namespace: ns, ElectionID: "release-order", Identity: identity, Revision: revision,
			Remote: remote, Lock: election.LeaseLock}
	}
	start := func(identity, revision string, remote bool) *instance {
		le, err := election.New(client, spec(identity, revision, remote), opts(t, testknobs.ReleaseYieldStep(orderStep))...)
		return newInstance(t, identity, le, err)
	}
	remote := start("stable-remote-1", "stable", true)
	local := start("stable-1", "stable", false)
	testutil.Eventually(t, 10*time.Second, testutil.Check("one stable instance to lead", func() bool { return len(leaders(remote, local)) == 1 }))
	for i := range 5 {
		name := fmt.Sprintf("canary-%d", i)
		canary := start(name, "canary", false)
		testutil.Eventually(t, 10*time.Second, testutil.Check(name+" to lead", func() bool { return slices.Equal(leaders(canary, remote, local), []string{name}) }))
		startsBefore := remote.startCount()
		canary.stop()
		testutil.Eventually(t, 10*time.Second, testutil.Check("stable-1 to lead after "+name+" stopped", func() bool { return local.leads() }))
		time.Sleep(50 * time.Millisecond)
		if n := remote.startCount(); n != startsBefore {
			t.Fatalf("trial %d: the remote instance led for a moment after %s released the lock", i, name)
		}
	}
}

// startCount is how many times the instance's run function started.
func (in *instance) startCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.started)
}

// A default flip entitles every instance of the new default at about the
// same time. The ones a better instance outranks let it ask first, so that
// the lock goes straight to the best one: here the remote instance learns
// of the flip a few milliseconds before the local one, as happens across
// processes, and still does not lead in between.
func TestDefaultFlipGoesStraightToTheBestCandidate(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	client := cluster.Client
	start := func(identity, revision string, remote bool, w revisions.DefaultWatcher) *instance {
		le, err := election.New(client, election.Spec{Namespace: ns, ElectionID: "flip-order", Identity: identity,
			Revision: revision, Remote: remote, Lock: election.LeaseLock}, opts(t, election.WithDefaultWatcher(w), testknobs.ReleaseYieldStep(orderStep))...)
		return newInstance(t, identity, le, err)
	}
	seenBy := map[string]*defaultwatch.Static{}
	for _, name := range []string{"canary-1", "stable-remote-1", "stable-1"} {
		seenBy[name] = defaultwatch.NewStatic("canary").(*defaultwatch.Static)
	}
	canary := start("canary-1", "canary", false, seenBy["canary-1"])
	testutil.Eventually(t, 10*time.Second, testutil.Check("canary-1 to lead", canary.leads))
	remote := start("stable-remote-1", "stable", true, seenBy["stable-remote-1"])
	local := start("stable-1", "stable", false, seenBy["stable-1"])
	time.Sleep(200 * time.Millisecond) // both followers see canary-1
	flip := func(rev string) {
		seenBy["stable-remote-1"].SetDefault(rev)
		seenBy["canary-1"].SetDefault(rev)
		time.Sleep(3 * time.Millisecond)
		seenBy["stable-1"].SetDefault(rev)
	}
	for i := range 3 {
		flip("stable")
		testutil.Eventually(t, 10*time.Second, testutil.Check("stable-1 to lead", local.leads))
		if n := remote.startCount(); n != 0 {
			t.Fatalf("flip %d: the remote instance led %d times on the way to stable-1", i, n)
		}
		flip("canary")
		testutil.Eventually(t, 10*time.Second, testutil.Check("canary-1 to lead again", canary.leads))
	}
}
