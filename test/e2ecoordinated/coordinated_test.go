package e2ecoordinated

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
)

// checkCandidates fails unless the status election has exactly one
// LeaseCandidate per identity in want, each naming the identity and the
// holder key it announces.
func (m *mesh) checkCandidates(want map[string]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := client.CoordinationV1beta1().LeaseCandidates(m.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	got := map[string]string{}
	for _, c := range list.Items {
		if c.Spec.LeaseName != statusLock {
			continue
		}
		id := c.Annotations[coordinated.IdentityAnnotation]
		if c.Name != candidateName(id) || c.Spec.Strategy != coordinated.Strategy {
			return fmt.Errorf("candidate %s of %q has strategy %q", c.Name, id, c.Spec.Strategy)
		}
		got[id] = c.Annotations[coordinated.HolderKeyAnnotation]
	}
	if len(got) != len(want) {
		return fmt.Errorf("candidates (identity: key) %v, want %v", got, want)
	}
	for id, key := range want {
		if got[id] != key {
			return fmt.Errorf("candidates (identity: key) %v, want %v", got, want)
		}
	}
	return nil
}

// leadsAlone fails unless name is the only process that says it leads the
// status election, the only one whose ledger shows the work running, and
// the one the Lease names.
func (m *mesh) leadsAlone(name string, procs ...*meshdproc.Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, p := range procs {
		if leads := p.Running() && p.Leads(ctx, statusLock); leads != (p.Name() == name) {
			return fmt.Errorf("%s says it leads: %v", p.Name(), leads)
		}
	}
	l, err := m.lease(statusLock)
	if err != nil {
		return err
	}
	if h := holderOf(l); h != candidateName(name) {
		return fmt.Errorf("the Lease names %q, want %q", h, candidateName(name))
	}
	alive := map[string]bool{}
	for _, p := range procs {
		alive[p.Name()] = p.Running()
	}
	// A term that has not stopped ends at the last entry of any ledger;
	// a killed process's terms never stop, so only live ones count.
	var running []string
	for _, in := range m.ledger() {
		if in.Stop.Equal(m.lastEntry()) && alive[in.Holder] {
			running = append(running, in.Holder)
		}
	}
	if !slices.Equal(running, []string{name}) {
		return fmt.Errorf("the ledgers show %v at work", running)
	}
	return nil
}

// lastEntry is the latest time any status term started or stopped: the
// time ledger.ReadFiles gives a term that has not stopped.
func (m *mesh) lastEntry() time.Time {
	var last time.Time
	for _, in := range m.ledger() {
		last = later(last, later(in.Start, in.Stop))
	}
	return last
}

// Three instances on the coordinated status election: each announces
// itself, the coordinator gives the Lease to the local stable instance
// (the status election is not remote-aware: --remote changes only the
// namespace controller's key, so the two stable instances tie on the
// mesh's rule and the candidate name decides),
// and a default flip moves it to the canary through preferredHolder
// without the two ever working at once.
func TestCoordinatedMeshFlipsWithoutOverlap(t *testing.T) {
	m := newMesh(t)
	m.setDefault("stable")
	holders := m.followLease(statusLock)
	stable := m.start("stable-1", "stable", false)
	remote := m.start("stable-remote-1", "stable", true)
	canary := m.start("canary-1", "canary", false)
	procs := []*meshdproc.Process{stable, remote, canary}

	waitFor(t, "three candidates", 15*time.Second, func() error {
		return m.checkCandidates(map[string]string{"stable-1": "stable", "stable-remote-1": "stable", "canary-1": "canary"})
	})
	waitFor(t, "stable-1 leading", 15*time.Second, func() error { return m.leadsAlone("stable-1", procs...) })
	l, err := m.lease(statusLock)
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.Strategy == nil || *l.Spec.Strategy != coordinated.Strategy {
		t.Fatalf("the Lease's strategy is %v, want %s", l.Spec.Strategy, coordinated.Strategy)
	}

	flipped := monoNow(t)
	m.setDefault("canary")
	took := waitFor(t, "canary-1 leading after the flip", 10*time.Second, func() error { return m.leadsAlone("canary-1", procs...) })
	intervals := m.ledger()
	cs := starts(intervals, "canary-1")
	if len(cs) != 1 {
		t.Fatalf("canary-1 started %d terms, want 1", len(cs))
	}
	t.Logf("canary-1's work started %v after the flip (seen leading %v after)", cs[0].Sub(flipped).Round(time.Millisecond), took.Round(time.Millisecond))
	if o := overlap(intervals, "", time.Time{}); o != 0 {
		t.Errorf("two instances ran the status work at once for %v: %+v", o, intervals)
	}
	// The Lease went from stable-1 straight to canary-1 (the API server's
	// controller may have created it without holder first).
	got := slices.DeleteFunc(holders.holders(), func(h string) bool { return h == "" })
	if want := []string{candidateName("stable-1"), candidateName("canary-1")}; !slices.Equal(got, want) {
		t.Errorf("the Lease named %v, want %v", got, want)
	}
}
