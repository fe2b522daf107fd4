package e2ecoordinated

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
)

// A SIGKILL of the process that runs the coordinator: another instance
// takes the coordinator election within a lease of the dead one's last
// renewal, and the killed instance's LeaseCandidate stops being live once
// its heartbeat window has passed. If the killed process did not hold the
// status Lease, its holder never changes; if it did, the Lease goes to the
// next best candidate once it has expired, never to a worse one first.
func TestKillCoordinatorProcess(t *testing.T) {
	for _, tc := range []struct {
		name string
		// first is started alone, so that it wins the coordinator
		// election; the others join once it coordinates.
		first string
		// holder leads the status election before the kill, after is the
		// one expected to lead it after.
		holder, after string
	}{
		// canary-1, alone at first, gets the status Lease and hands it to
		// stable-1, of the default revision, when that joins.
		{name: "coordinator does not hold the lock", first: "canary-1", holder: "stable-1", after: "stable-1"},
		{name: "coordinator holds the lock", first: "stable-1", holder: "stable-1", after: "stable-remote-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMesh(t)
			m.setDefault("stable")
			specs := map[string]struct {
				rev    string
				remote bool
			}{"stable-1": {"stable", false}, "stable-remote-1": {"stable", true}, "canary-1": {"canary", false}}
			procs := map[string]*meshdproc.Process{}
			procs[tc.first] = m.start(tc.first, specs[tc.first].rev, specs[tc.first].remote)
			waitFor(t, tc.first+" coordinating", 15*time.Second, func() error {
				l, err := m.lease(coordinatorLock)
				if h := holderOf(l); err == nil && h != tc.first {
					err = fmt.Errorf("%s names %q", coordinatorLock, h)
				}
				return err
			})
			for _, name := range []string{"stable-1", "stable-remote-1", "canary-1"} {
				if name != tc.first {
					procs[name] = m.start(name, specs[name].rev, specs[name].remote)
				}
			}
			all := []*meshdproc.Process{procs["stable-1"], procs["stable-remote-1"], procs["canary-1"]}
			waitFor(t, tc.holder+" leading", 15*time.Second, func() error { return m.leadsAlone(tc.holder, all...) })
			killCoordinator(t, m, procs[tc.first], tc.holder, tc.after, all)
		})
	}
}

// killCoordinator kills victim, which coordinates while holder leads the
// status election, and checks the coordinator's failover, the status
// election's holders (after is expected to lead at the end) and the
// victim's candidate.
func killCoordinator(t *testing.T, m *mesh, victim *meshdproc.Process, holder, after string, all []*meshdproc.Process) {
	t.Helper()
	roster, release, err := coordinated.NewRosters().Acquire(client, m.ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	waitFor(t, "every candidate live", 10*time.Second, func() error { return liveCandidates(roster, 3) })
	statusWrites := m.followLease(statusLock)
	coordWrites := m.followLease(coordinatorLock)

	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := monoNow(t)
	killedWall := time.Now()
	l, err := m.lease(coordinatorLock)
	if err != nil {
		t.Fatal(err)
	}
	if h := holderOf(l); h != victim.Name() || l.Spec.RenewTime == nil {
		t.Fatalf("%s names %q just after the kill of %s", coordinatorLock, h, victim.Name())
	}
	lastRenew := l.Spec.RenewTime.Time

	// A new coordinator: acquireTime is written by the new holder, on the
	// same host's clock as the victim's renewTime.
	var taken write
	waitFor(t, "a new coordinator", ttl+5*time.Second, func() error {
		ws, err := coordWrites.all()
		for _, w := range ws {
			if w.holder != victim.Name() && w.holder != "" {
				taken = w
				return nil
			}
		}
		return fmt.Errorf("no other holder yet (watch error: %v)", err)
	})
	took := taken.acquire.Sub(lastRenew)
	t.Logf("%s took %s %v after %s's last renewal (seen %v after; killed %v after it)", taken.holder, coordinatorLock,
		took.Round(time.Millisecond), victim.Name(), taken.seen.Sub(lastRenew).Round(time.Millisecond),
		killedWall.Sub(lastRenew).Round(time.Millisecond))
	if bound := ttl + failoverMargin(); took > bound || took < ttl {
		t.Errorf("the new coordinator acquired %v after the last renewal, want within [%v, %v]", took, ttl, bound)
	}

	// The victim's candidate leaves the ranking once it missed
	// LivenessFactor heartbeats (2 x 2 x ttl with the daemon's default).
	waitFor(t, victim.Name()+"'s candidate no longer live", 4*coordinated.LivenessFactor*ttl, func() error {
		return notLive(roster, victim.Name())
	})
	t.Logf("%s's candidate stopped being live %v after the kill", victim.Name(), time.Since(killedWall).Round(time.Millisecond))
	waitFor(t, after+" leading", 10*time.Second, func() error { return m.leadsAlone(after, all...) })

	want := []string{candidateName(holder)}
	if after != holder {
		want = append(want, candidateName(after))
	}
	if got := statusWrites.holders(); !slices.Equal(got, want) {
		t.Errorf("%s named %v after the kill, want %v", statusLock, got, want)
	}
	intervals := m.ledger()
	if o := overlap(intervals, victim.Name(), killedAt); o != 0 {
		t.Errorf("two instances ran the status work at once for %v: %+v", o, intervals)
	}
	if after != holder {
		ws, _ := statusWrites.all()
		for _, w := range ws {
			if w.holder == candidateName(after) {
				t.Logf("%s holds %s %v after %s's last renewal of it", after, statusLock,
					w.acquire.Sub(statusLastRenew(ws, candidateName(holder))).Round(time.Millisecond), holder)
				break
			}
		}
	}
}

// statusLastRenew is the last renewTime written by holder in ws.
func statusLastRenew(ws []write, holder string) time.Time {
	var last time.Time
	for _, w := range ws {
		if w.holder == holder {
			last = w.renew
		}
	}
	return last
}

// liveCandidates fails unless the status election has n live candidates.
func liveCandidates(r *coordinated.Roster, n int) error {
	var live []string
	for _, c := range r.Candidates(statusLock) {
		if c.Live {
			live = append(live, c.Identity)
		}
	}
	if len(live) != n {
		return fmt.Errorf("live candidates %v, want %d", live, n)
	}
	return nil
}

// notLive fails unless identity's candidate is known and not live, and
// absent from the ranking.
func notLive(r *coordinated.Roster, identity string) error {
	for _, c := range r.Candidates(statusLock) {
		if c.Identity != identity {
			continue
		}
		if c.Live {
			return fmt.Errorf("%s's candidate is live, renewed %v", identity, c.RenewTime)
		}
		for _, mem := range r.Ranked(statusLock, "stable") {
			if mem.Name == c.Name {
				return fmt.Errorf("%s's candidate is not live but ranked", identity)
			}
		}
		return nil
	}
	return fmt.Errorf("%s's candidate is missing", identity)
}

// failoverMargin is how long after the lease a new coordinator may take
// over: 100 ms, meshd's target for a failover; a race-enabled meshd runs
// several times slower, so it gets 400 ms.
func failoverMargin() time.Duration {
	if raceEnabled {
		return 400 * time.Millisecond
	}
	return 100 * time.Millisecond
}
