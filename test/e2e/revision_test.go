package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/election/priority"
	"github.com/meshd-io/meshd/internal/testing/testutil"
)

// priorityBound is how long a prioritized election may take to move after
// the default revision changes or a better candidate appears. meshd's
// target is under a second (the old leader stops its controllers, then
// hands over); the margin is for slow machines and race-enabled binaries.
// It is far below the 4s lease used with it, so that a takeover at expiry
// cannot pass for a handover.
const priorityBound = 2 * time.Second

// The prioritized elections follow the default revision, in both
// directions, while each revision keeps its own per-revision leader.
func TestDefaultRevisionMovesPrioritizedElections(t *testing.T) {
	const ttl = 4 * time.Second
	m := newMesh(t)
	prioritized := []string{namespaceLock, statusLock}

	// No default yet: the first instance leads, whatever its revision.
	m.start("canary-1", "canary", withTTL(ttl))
	m.watchLeaders(append(prioritized, revisionLock("canary")), in("canary-1")).wait(t, 10*time.Second)
	m.start("stable-1", "stable", withTTL(ttl))
	m.start("stable-2", "stable", withTTL(ttl))
	m.start("canary-2", "canary", withTTL(ttl))
	stableLeader, _ := m.waitLeader(revisionLock("stable"), 10*time.Second, in("stable-1", "stable-2"))
	testutil.Consistently(t, ttl/2, func() error {
		for _, l := range prioritized {
			if h := m.holder(l); h != "canary-1" {
				return fmt.Errorf("%s moved to %q although no default revision is known", l, h)
			}
		}
		return nil
	})

	stable := in("stable-1", "stable-2")
	canary := in("canary-1", "canary-2")
	for _, step := range []struct {
		rev    string
		accept func(string) bool
	}{
		{"stable", stable},
		{"canary", canary},
		{"stable", stable},
	} {
		w := m.watchLeaders(prioritized, step.accept)
		m.setDefault(step.rev)
		for l, took := range w.wait(t, priorityBound+5*time.Second) {
			t.Logf("default %s: %s leads %s %v after the label update", step.rev, m.holder(l), l, took.Round(time.Millisecond))
			if took > priorityBound {
				t.Errorf("default %s: %s moved after %v, want within %v", step.rev, l, took, priorityBound)
			}
			if rec, _ := m.lock(l); priority.ParseKey(rec.HolderKey).Revision != step.rev {
				t.Errorf("%s: holder key %q, want revision %s", l, rec.HolderKey, step.rev)
			}
		}
		// Per-revision elections never preempt: same leaders as before.
		if h := m.holder(revisionLock("stable")); h != stableLeader {
			t.Errorf("%s moved from %s to %q", revisionLock("stable"), stableLeader, h)
		}
		if h := m.holder(revisionLock("canary")); h != "canary-1" {
			t.Errorf("%s moved from canary-1 to %q", revisionLock("canary"), h)
		}
	}

	// Without a default nobody steals: the stable leaders stay.
	holders := map[string]string{}
	for _, l := range prioritized {
		holders[l] = m.holder(l)
	}
	m.setDefault("")
	testutil.Consistently(t, ttl/2, func() error {
		for _, l := range prioritized {
			if h := m.holder(l); h != holders[l] {
				return fmt.Errorf("%s moved from %s to %q after the default was removed", l, holders[l], h)
			}
		}
		return nil
	})
}

// In the remote-aware namespace election a local instance takes the lock
// from a remote one of the same revision, without any default revision.
func TestLocalInstanceTakesOverFromRemote(t *testing.T) {
	const ttl = 4 * time.Second
	m := newMesh(t)
	m.start("remote-1", "stable", withTTL(ttl), withRemote())
	m.waitLeader(namespaceLock, 10*time.Second, in("remote-1"))
	if rec, _ := m.lock(namespaceLock); rec.HolderKey != priority.RemotePrefix+"stable" || !rec.Remote {
		t.Fatalf("remote-1 holds %s with key %q, want %q", namespaceLock, rec.HolderKey, priority.RemotePrefix+"stable")
	}

	w := m.watchLeaders([]string{namespaceLock}, in("local-1"))
	m.start("local-1", "stable", withTTL(ttl))
	took := w.wait(t, priorityBound+10*time.Second)[namespaceLock]
	t.Logf("local-1 took %s %v after it was started", namespaceLock, took.Round(time.Millisecond))
	if took > priorityBound+time.Second { // includes the process start
		t.Errorf("local-1 took over after %v, want within %v of its start", took, priorityBound+time.Second)
	}
	if rec, _ := m.lock(namespaceLock); rec.HolderKey != "stable" {
		t.Errorf("holder key %q, want stable", rec.HolderKey)
	}
	// And never back: the remote instance does not steal from a local one.
	testutil.Consistently(t, ttl/2, func() error {
		if h := m.holder(namespaceLock); h != "local-1" {
			return fmt.Errorf("%s moved to %q", namespaceLock, h)
		}
		return nil
	})
}

// When the default revision changes, a remote instance of the new default
// may be handed the namespace lock first; a local one of the same revision
// must then take it, every time. That second move waits until the remote
// instance's term is a RetryPeriod old (steals are damped to one per
// RetryPeriod), so its bound is priorityBound plus a RetryPeriod.
func TestDefaultChangeSettlesOnLocalInstance(t *testing.T) {
	const ttl = 4 * time.Second
	m := newMesh(t)
	m.start("canary-1", "canary", withTTL(ttl))
	m.waitLeader(namespaceLock, 10*time.Second, in("canary-1"))
	m.start("stable-remote-1", "stable", withTTL(ttl), withRemote())
	m.start("stable-1", "stable", withTTL(ttl))

	// Each round is a fresh race between the remote and the local
	// instance for canary-1's handover.
	for round := 1; round <= 4; round++ {
		for _, step := range []struct{ rev, want string }{{"stable", "stable-1"}, {"canary", "canary-1"}} {
			w := m.watchLeaders([]string{namespaceLock}, in(step.want))
			m.setDefault(step.rev)
			took := w.wait(t, priorityBound+15*time.Second)[namespaceLock]
			t.Logf("round %d, default %s: %s leads after %v", round, step.rev, step.want, took.Round(time.Millisecond))
			if bound := priorityBound + ttl/4; took > bound {
				t.Errorf("round %d, default %s: %s took %v to settle on %s, want within %v",
					round, step.rev, namespaceLock, took, step.want, bound)
			}
		}
	}
}
