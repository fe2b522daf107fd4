package integration

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/faultproxy"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
)

// sessionProcess is n elections of one process, all with sessions.
type sessionProcess struct {
	link      *faultLink
	instances []*instance
}

func startSessionProcess(t *testing.T, c *testcluster.Cluster, ns, identity string, n int, extra ...election.Option) *sessionProcess {
	link := newFaultLink(t, c)
	p := &sessionProcess{link: link}
	for i := range n {
		le, err := election.New(link.client, election.Spec{Namespace: ns, ElectionID: fmt.Sprintf("sess-%d", i),
			Identity: identity, Lock: election.LeaseLock}, link.opts(t, append([]election.Option{election.WithSessions(true)}, extra...)...)...)
		p.instances = append(p.instances, newInstance(t, fmt.Sprintf("%s/%d", identity, i), le, err))
	}
	return p
}

func (p *sessionProcess) leadsAll() bool {
	for _, in := range p.instances {
		if !in.leads() {
			return false
		}
	}
	return true
}

func (p *sessionProcess) leadsAny() bool {
	for _, in := range p.instances {
		if in.leads() {
			return true
		}
	}
	return false
}

// With sessions, a process leading many elections renews one Lease per
// retry period, and its followers make no requests.
func TestSessionRenewsEveryRecordWithOneLease(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	const n = 20
	a := startSessionProcess(t, c, ns, "a", n)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead every election", a.leadsAll))
	b := startSessionProcess(t, c, ns, "b", n)
	time.Sleep(ttl) // both settled: b has listed, and a named its session in every record
	a.link.takeCounts()
	b.link.takeCounts()
	window := 4 * ttl // 16 retry periods
	testutil.Consistently(t, window, testutil.Check("a to lead every election and b none", func() bool { return a.leadsAll() && !b.leadsAny() }))
	sessionPath := "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/" + session.LeaseName("a", ttl)
	got := a.link.takeCounts()
	t.Logf("leader's requests in %v: %v", window, got)
	if renewals, total := onlyTo(got, "PUT "+sessionPath+" 200"); renewals < 12 || total != renewals {
		t.Errorf("leader's requests in %v: %v; want only about 16 renewals of its session Lease", window, got)
	}
	bSession := "PUT /apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/" + session.LeaseName("b", ttl) + " 200"
	if got := b.link.takeCounts(); func() bool { n, total := onlyTo(got, bSession); return n == 0 || n != total }() {
		t.Errorf("follower's requests in %v: %v; want only the renewals of its own session Lease", window, got)
	}
	lease, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), "sess-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := a.instances[0].le.Status(); st.Session != session.LeaseName("a", ttl) || st.SessionFallback {
		t.Errorf("status: session %q, fallback %v; want a's session and no fallback", st.Session, st.SessionFallback)
	}
	mark := lease.Annotations[lockmeta.SessionAnnotationKey]
	if !strings.Contains(mark, session.LeaseName("a", ttl)) || *lease.Spec.HolderIdentity != "a" {
		t.Errorf("the lock names holder %q with session mark %q; want a and its session", *lease.Spec.HolderIdentity, mark)
	}
}

// A holder cut off from the API server stops all its work within the renew
// deadline of its last heartbeat; the follower takes over only once the
// holder's session has run out by its own observation, so no election has
// two leaders at once.
func TestSessionLossStopsWorkBeforeAFollowerTakesOver(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	const n = 10
	a := startSessionProcess(t, c, ns, "a", n, election.WithReleaseOnCancel(false))
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead every election", a.leadsAll))
	b := startSessionProcess(t, c, ns, "b", n)
	time.Sleep(ttl)
	a.link.cut.Store(true)
	cutAt := time.Now()
	testutil.Eventually(t, 15*time.Second, testutil.Check("b to lead every election", b.leadsAll))
	for i := range n {
		old, next := a.instances[i], b.instances[i]
		old.mu.Lock()
		stopped := old.stopped
		old.mu.Unlock()
		if len(stopped) != 1 {
			t.Fatalf("election %d: a's work stopped %d times, want once", i, len(stopped))
		}
		stop, start := stopped[0], next.lastStart()
		if !start.After(stop) {
			t.Errorf("election %d: b started %v before a stopped", i, stop.Sub(start))
		}
		// The last heartbeat that succeeded was sent before the cut: a
		// stops within the renew deadline (ttl/2) of it.
		if late := stop.Sub(cutAt); late > ttl/2+100*time.Millisecond {
			t.Errorf("election %d: a stopped %v after the cut, later than its renew deadline %v allows", i, late, ttl/2)
		}
		// b saw a's last heartbeat no earlier than a retry period (ttl/4)
		// before the cut, and waits a lease (ttl) after it.
		if gap := start.Sub(cutAt); gap < ttl-ttl/4 {
			t.Errorf("election %d: b took over %v after the cut, before a's session could have run out", i, gap)
		}
		if i == 0 {
			t.Logf("election 0: a stopped %v after the cut, b started %v after it", stop.Sub(cutAt), start.Sub(cutAt))
		}
	}
}

// A session candidate that sees a holder without sessions (istiod, or meshd
// without them) renews its own record when it leads, so that such a
// candidate never finds its record stale.
func TestSessionCandidateRenewsItsRecordInAMixedElection(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	spec := func(identity string) election.Spec {
		return election.Spec{Namespace: ns, ElectionID: "mixed", Identity: identity, Lock: election.LeaseLock}
	}
	le, err := election.New(c.Client, spec("plain"), opts(t)...)
	plain := newInstance(t, "plain", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("plain to lead", plain.leads))
	link := newFaultLink(t, c)
	le, err = election.New(link.client, spec("s"), link.opts(t, election.WithSessions(true))...)
	s := newInstance(t, "s", le, err)
	time.Sleep(ttl / 2)
	plain.stop() // releases: s takes over at once
	testutil.Eventually(t, 10*time.Second, testutil.Check("s to lead", s.leads))
	if st := s.le.Status(); !st.SessionFallback || st.Session == "" {
		t.Errorf("status: session %q, fallback %v; want s's session and the fallback", st.Session, st.SessionFallback)
	}
	first := renewTime(t, c, ns, "mixed")
	time.Sleep(ttl)
	if later := renewTime(t, c, ns, "mixed"); !later.After(first) {
		t.Errorf("s did not renew its record itself in %v after taking over from a holder without sessions", ttl)
	}
}

func renewTime(t *testing.T, c *testcluster.Cluster, ns, name string) time.Time {
	t.Helper()
	lease, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return lease.Spec.RenewTime.Time
}

// onlyTo counts the requests of counts whose key is key, and all of them.
func onlyTo(counts map[string]int, key string) (n, total int) {
	for k, c := range counts {
		total += c
		if k == key {
			n += c
		}
	}
	return n, total
}

// A follower whose traffic is held rather than refused (its watch stalls
// without breaking, its writes wait in the network) sees no heartbeat of
// the holder's session for longer than a lease. It must not take that for
// the session's end: the holder does not rewrite its lock object while its
// session renews it, so a takeover written with the object's old
// resourceVersion would still succeed once the traffic flows again, while
// the holder works. The follower judges other sessions only while its
// watch shows it its own heartbeats.
func TestStalledFollowerDoesNotTakeALockHeldThroughALiveSession(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	a := startSessionProcess(t, c, ns, "a", 1, election.WithReleaseOnCancel(false))
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leadsAll))

	u, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cfg := rest.CopyConfig(c.Config)
	cfg.Host = "https://" + proxy.Addr()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	le, err := election.New(client, election.Spec{Namespace: ns, ElectionID: "sess-0", Identity: "b", Lock: election.LeaseLock},
		opts(t, election.WithSessions(true))...)
	b := newInstance(t, "b", le, err)
	time.Sleep(2 * ttl) // b has listed and follows a, whose record is no longer rewritten

	proxy.Partition()
	time.Sleep(3 * ttl) // b sees nothing of a's session for longer than a lease
	proxy.Heal()
	time.Sleep(2 * ttl)

	b.mu.Lock()
	bStarted := len(b.started)
	b.mu.Unlock()
	holder := a.instances[0]
	holder.mu.Lock()
	aStopped := len(holder.stopped)
	holder.mu.Unlock()
	if bStarted != 0 || aStopped != 0 {
		t.Fatalf("after b's traffic was held for %v: b started %d time(s), a stopped %d time(s); want a to keep leading", 3*ttl, bStarted, aStopped)
	}
}
