package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
)

// A session holder whose watch stalls (open, no error, nothing delivered)
// never writes its record while its heartbeat works, so it never learns
// that a higher-priority candidate took the lock by force; the stealer's
// fence (a lease after it last saw the session renewed) passes and both
// run their work.
func TestStalledWatchSessionHolderNoticesSteal(t *testing.T) {
	t.Parallel()
	runStalledWatchSteal(t, true, true)
}

// One election of a process stops without releasing its lock (the
// documented behaviour of WithReleaseOnCancel(false): others take over
// after the lease) while another election of the same process keeps the
// session alive: the stopped election's record still names the live
// session, so the follower must still take it within about a lease.
func TestStoppedElectionWithoutReleaseExpires(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	l := &ledger.Ledger{}
	aLink, bLink := newFaultLink(t, c), newFaultLink(t, c)
	var a, b []*instance
	for i := range 2 {
		a = append(a, sessionElection(t, aLink, leaseSpec(ns, fmt.Sprintf("st-%d", i), "a"), "a", l, election.WithReleaseOnCancel(false)))
	}
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead both", func() bool { return len(leaders(a...)) == 2 }))
	for i := range 2 {
		b = append(b, sessionElection(t, bLink, leaseSpec(ns, fmt.Sprintf("st-%d", i), "b"), "b", l))
	}
	time.Sleep(ttl)
	a[0].stop() // a's election st-1 keeps running, and with it a's session
	stopped := time.Now()
	testutil.Eventually(t, 4*ttl, testutil.Check("b to take the stopped election st-0", b[0].leads))
	t.Logf("b took st-0 %v after a stopped it", time.Since(stopped).Round(time.Millisecond))
	if !a[1].leads() || b[1].leads() {
		t.Errorf("st-1: a leads %v, b leads %v; want a only", a[1].leads(), b[1].leads())
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders ran at once: %+v", o)
	}
}

// Elections of ttl 1.5s and 2s in one process have different lease
// durations, so by the session package's promise they use different
// session Leases; both round up to 2s and share one Lease name, so their
// two heartbeats (different timing, different tokens) fight over it.
func TestTwoTTLsUseTwoSessionLeases(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	link := newFaultLink(t, c)
	x := sessionElection(t, link, leaseSpec(ns, "ttl-a", "p"), "x", nil)
	le, err := election.New(link.client, leaseSpec(ns, "ttl-b", "p"), append(link.opts(t, election.WithSessions(true)), election.WithTTL(1500*time.Millisecond))...)
	y := newInstance(t, "y", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("both to lead", func() bool { return x.leads() && y.leads() }))
	time.Sleep(2 * ttl)
	if got := sessionLeases(t, c, ns); len(got) != 2 {
		t.Errorf("session Leases %v; want one per lease duration (2s and 1.5s)", got)
	}
	if n := link.countMatching("PUT", session.LeasePrefix, " 409"); n > 0 {
		t.Errorf("%d session heartbeats of one process conflicted with each other in %v", n, 2*ttl)
	}
}

// A holder that stops without releasing leaves its locks to expire: it
// detaches each from its session with one more write, so that followers
// wait a lease from that write, as for a holder without sessions, and not
// for as long as its session (or, here, its end) decides.
func TestStopWithoutReleaseLeavesLocksToExpire(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	const n = 4
	aLink := newFaultLink(t, c)
	var a, b []*instance
	for i := range n {
		a = append(a, sessionElection(t, aLink, leaseSpec(ns, fmt.Sprintf("ge-%d", i), "a"), "a", nil, election.WithReleaseOnCancel(false)))
	}
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead all", func() bool { return len(leaders(a...)) == n }))
	bLink := newFaultLink(t, c)
	for i := range n {
		b = append(b, sessionElection(t, bLink, leaseSpec(ns, fmt.Sprintf("ge-%d", i), "b"), "b", nil))
		time.Sleep(ttl / 4)
	}
	time.Sleep(2 * ttl)
	stopped := time.Now()
	for _, in := range a {
		in.stop()
	}
	testutil.Eventually(t, 10*time.Second, testutil.Check("b to lead all", func() bool { return len(leaders(b...)) == n }))
	for i, in := range b {
		if took := in.lastStart().Sub(stopped); took < ttl-ttl/4 || took > 2*ttl {
			t.Errorf("election %d: b took over %v after a stopped without releasing; want about a lease (%v)", i, took, ttl)
		}
	}
}

// A follower whose watch of Leases stalls stops seeing the holder's
// heartbeats, judges the live session dead a lease later, and takes the
// lock: the holder's record has not changed, so the follower's write over
// the version it last saw succeeds (without sessions the holder's renewals
// make it conflict). The holder sees the write through its own watch and
// stops, but the follower, which took an expired lock, started at once.
func TestStalledFollowerWithSessionsKeepsAway(t *testing.T) {
	t.Parallel()
	runStalledFollower(t, true)
}

// A foreign edit of the lock object's session mark (garbage JSON, as a
// hand edit or a tool that rewrites annotations may leave; removing the
// annotation acts the same) is not a change of the record, and must not
// shorten a live holder's lease any more than it may extend a dead one's.
// The follower reads the mark from the newest object, finds no session,
// judges the holder by its record, which the holder stopped rewriting long
// ago, and takes the lock at once from the live holder.
func TestGarbageMarkDoesNotEndLiveHolder(t *testing.T) {
	t.Parallel()
	for _, edit := range []struct {
		name string
		set  func(annotations map[string]string)
	}{
		{"garbage", func(a map[string]string) { a[lockmeta.SessionAnnotationKey] = "{not json" }},
		{"removed", func(a map[string]string) { delete(a, lockmeta.SessionAnnotationKey) }},
	} {
		t.Run(edit.name, func(t *testing.T) {
			c := testcluster.Get(t)
			ns := c.NewNamespace(t)
			l := &ledger.Ledger{}
			a := sessionElection(t, newFaultLink(t, c), leaseSpec(ns, "gm", "a"), "a", l)
			testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
			b := sessionElection(t, newFaultLink(t, c), leaseSpec(ns, "gm", "b"), "b", l)
			time.Sleep(2 * ttl) // a's record is older than a lease; its session keeps it
			leases := c.Client.CoordinationV1().Leases(ns)
			lease, err := leases.Get(context.Background(), "gm", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			edit.set(lease.Annotations)
			if _, err := leases.Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			edited := time.Now()
			time.Sleep(2 * ttl)
			for _, iv := range l.Intervals() {
				if iv.Holder == b.name {
					t.Errorf("b took the lock from the live holder a %v after the edit", iv.Start.Sub(edited).Round(time.Millisecond))
				}
			}
			if o := l.Overlaps(); len(o) != 0 {
				t.Errorf("two leaders ran at once: %+v", o)
			}
		})
	}
}
