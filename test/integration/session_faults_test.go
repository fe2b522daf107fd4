package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/election/testknobs"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
)

// faultLink is one simulated process's way to the API server whose faults
// are finer than a partition: its watch streams can stall (the connection
// stays open, no error, but nothing arrives, as behind a stuck proxy or an
// API server whose watch cache lags), and writes to paths containing a
// chosen substring can be refused.
type faultLink struct {
	client kubernetes.Interface
	// shared is what the elections of the link's process share.
	shared *election.Shared
	// cut fails every request, as a partition from the API server does.
	cut   atomic.Bool
	stall atomic.Bool
	// stallOnly, when set, limits stalling to watches whose path
	// contains it.
	stallOnly string
	// failWrites, when not empty, makes every PUT or POST whose path
	// contains it fail.
	failWrites atomic.Value // string

	mu     sync.Mutex
	counts map[string]int // "verb path status"
}

type faultTransport struct {
	link *faultLink
	next http.RoundTripper
}

func (t *faultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.link.cut.Load() {
		return nil, errors.New("partitioned from the API server")
	}
	if sub, _ := t.link.failWrites.Load().(string); sub != "" && (req.Method == http.MethodPut || req.Method == http.MethodPost) &&
		strings.Contains(req.URL.Path, sub) {
		t.link.count(req.Method+" "+req.URL.Path+" refused", 1)
		return nil, errors.New("write refused by the test")
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	t.link.count(fmt.Sprintf("%s %s %d", req.Method, req.URL.Path, resp.StatusCode), 1)
	if w := req.URL.Query().Get("watch"); (w == "true" || w == "1") && strings.Contains(req.URL.Path, t.link.stallOnly) {
		resp.Body = &stallBody{link: t.link, rc: resp.Body, closed: make(chan struct{})}
	}
	return resp, nil
}

func (l *faultLink) count(key string, n int) {
	l.mu.Lock()
	l.counts[key] += n
	l.mu.Unlock()
}

// takeCounts returns the counts so far and starts afresh.
func (l *faultLink) takeCounts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.counts
	l.counts = map[string]int{}
	return out
}

// countMatching sums the counts whose key contains every part.
func (l *faultLink) countMatching(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	sum := 0
next:
	for k, n := range l.counts {
		for _, p := range parts {
			if !strings.Contains(k, p) {
				continue next
			}
		}
		sum += n
	}
	return sum
}

// stallBody holds back what it read while its link stalls.
type stallBody struct {
	link      *faultLink
	rc        io.ReadCloser
	closeOnce sync.Once
	closed    chan struct{}
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	for b.link.stall.Load() {
		select {
		case <-b.closed:
			return 0, io.ErrUnexpectedEOF
		case <-time.After(10 * time.Millisecond):
		}
	}
	return n, err
}

func (b *stallBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return b.rc.Close()
}

func newFaultLink(t *testing.T, c *testcluster.Cluster) *faultLink {
	t.Helper()
	link := &faultLink{counts: map[string]int{}, shared: election.NewShared()}
	link.failWrites.Store("")
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &faultTransport{link: link, next: rt} })
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	link.client = client
	// Never leave a stalled stream behind: the watches must be able to stop.
	t.Cleanup(func() { link.stall.Store(false); link.cut.Store(false); link.failWrites.Store("") })
	return link
}

// opts are the options of an election of the link's process: the test's,
// then extra, and the process's Shared.
func (l *faultLink) opts(t *testing.T, extra ...election.Option) []election.Option {
	return append(opts(t, extra...), election.WithShared(l.shared))
}

// sessionLeases lists the session Leases of ns.
func sessionLeases(t *testing.T, c *testcluster.Cluster, ns string) []string {
	t.Helper()
	list, err := c.Client.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{LabelSelector: session.Label + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	return names
}

// sessionMark reads the session mark of Lease lock name.
func sessionMark(t *testing.T, c *testcluster.Cluster, ns, name string) (holder string, mark lockmeta.SessionMark) {
	t.Helper()
	lease, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if raw := lease.Annotations[lockmeta.SessionAnnotationKey]; raw != "" {
		if err := jsonUnmarshal(raw, &mark); err != nil {
			t.Fatalf("session mark %q of %s: %v", raw, name, err)
		}
	}
	return holder, mark
}

// sessionTokenOf reads the token of the session Lease of identity.
func sessionTokenOf(t *testing.T, c *testcluster.Cluster, ns, identity string) string {
	t.Helper()
	lease, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), session.LeaseName(identity, ttl), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return lease.Annotations[session.TokenAnnotation]
}

// sessionElection starts one election with sessions over link.
func sessionElection(t *testing.T, link *faultLink, spec election.Spec, name string, l *ledger.Ledger, extra ...election.Option) *instance {
	t.Helper()
	le, err := election.New(link.client, spec, link.opts(t, append([]election.Option{election.WithSessions(true)}, extra...)...)...)
	if l != nil {
		return ledgered(t, l, name, le, err)
	}
	return newInstance(t, name, le, err)
}

func leaseSpec(ns, id, identity string) election.Spec {
	return election.Spec{Namespace: ns, ElectionID: id, Identity: identity, Lock: election.LeaseLock}
}

// Deleting the holder's session Lease again and again (as a careless
// cleanup job would) is not the end of the session: a follower running
// all along and a follower that starts while the Lease is gone both keep
// away, and the holder keeps leading through its recreated Lease.
func TestSessionLeaseDeletedWhileHolding(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	l := &ledger.Ledger{}
	aLink, bLink, dLink := newFaultLink(t, c), newFaultLink(t, c), newFaultLink(t, c)
	a := sessionElection(t, aLink, leaseSpec(ns, "del", "a"), "a", l)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
	b := sessionElection(t, bLink, leaseSpec(ns, "del", "b"), "b", l)
	time.Sleep(ttl) // a names its session and stops rewriting its record

	name := session.LeaseName("a", ttl)
	leases := c.Client.CoordinationV1().Leases(ns)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var deletes atomic.Int32
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := leases.Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
				deletes.Add(1)
			}
			select {
			case <-ctx.Done():
			case <-time.After(ttl / 8):
			}
		}
	})
	var d *instance
	time.Sleep(ttl / 8)
	d = sessionElection(t, dLink, leaseSpec(ns, "del", "d"), "d", l) // starts with the Lease most likely gone
	// On a loaded machine a may miss a renew deadline and take its own lock
	// back; what must never happen is another candidate leading.
	testutil.Consistently(t, 3*ttl, testutil.Check("no one but a to lead", func() bool { return !b.leads() && !d.leads() }))
	if !a.leads() {
		t.Error("a does not lead after its session Lease was deleted again and again")
	}
	cancel()
	wg.Wait()
	if deletes.Load() < 5 {
		t.Fatalf("deleted the session Lease only %d times", deletes.Load())
	}
	testutil.Eventually(t, 5*time.Second, testutil.Check("the session Lease to be back", func() bool {
		_, err := leases.Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	}))
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders ran at once: %+v", o)
	}
	t.Logf("deleted a's session Lease %d times", deletes.Load())
}

// A holder whose session heartbeat fails while its record writes work
// renews its record itself: it keeps leading, the follower keeps away, and
// once the heartbeat works again the record names the session again.
func TestHeartbeatFailsRecordWritesWork(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	l := &ledger.Ledger{}
	aLink, bLink := newFaultLink(t, c), newFaultLink(t, c)
	a := sessionElection(t, aLink, leaseSpec(ns, "hb", "a"), "a", l)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
	b := sessionElection(t, bLink, leaseSpec(ns, "hb", "b"), "b", l)
	time.Sleep(ttl)
	if _, mark := sessionMark(t, c, ns, "hb"); mark.Session == "" {
		t.Fatalf("a's record names no session: %+v", mark)
	}
	aLink.failWrites.Store("/leases/" + session.LeaseName("a", ttl))
	before := renewTime(t, c, ns, "hb")
	testutil.Consistently(t, 3*ttl, testutil.Check("b not to lead", func() bool { return !b.leads() }))
	if !a.leads() {
		t.Error("a does not lead while its session fails")
	}
	if after := renewTime(t, c, ns, "hb"); !after.After(before.Add(ttl)) {
		t.Errorf("a's record was renewed at %v, then %v: a did not renew it itself while its session failed", before, after)
	}
	if n := aLink.countMatching("refused", session.LeaseName("a", ttl)); n < 4 {
		t.Fatalf("only %d heartbeats were refused", n)
	}
	if _, mark := sessionMark(t, c, ns, "hb"); mark.Holder != "a" || mark.Session != "" {
		t.Errorf("while the session fails the mark is %+v, want holder a without a session", mark)
	}
	aLink.failWrites.Store("")
	testutil.Eventually(t, 5*time.Second, testutil.Check("the record to name a's session again", func() bool {
		_, mark := sessionMark(t, c, ns, "hb")
		return mark.Session != ""
	}))
	testutil.Consistently(t, ttl, testutil.Check("b not to lead", func() bool { return !b.leads() }))
	testutil.Eventually(t, 5*time.Second, testutil.Check("a to lead", a.leads))
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders ran at once: %+v", o)
	}
}

// A process that crashes (cut off) and comes back under the same identity
// draws a new token: the old records name the old token, and the new
// process does not renew them as its own (its predecessor may still work
// until their lease has passed). Each election goes to whoever sees the old
// record expire first, the follower or the restarted process, which then
// names its new session; two leaders never run at once.
func TestRestartUnderSameIdentity(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	const n = 3
	l := &ledger.Ledger{}
	old := newFaultLink(t, c)
	var a []*instance
	for i := range n {
		a = append(a, sessionElection(t, old, leaseSpec(ns, fmt.Sprintf("rs-%d", i), "a"), "a-old", l, election.WithReleaseOnCancel(false)))
	}
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead all", func() bool {
		for _, in := range a {
			if !in.leads() {
				return false
			}
		}
		return true
	}))
	time.Sleep(ttl)
	oldToken := sessionTokenOf(t, c, ns, "a")
	bLink := newFaultLink(t, c)
	var b []*instance
	for i := range n {
		b = append(b, sessionElection(t, bLink, leaseSpec(ns, fmt.Sprintf("rs-%d", i), "b"), "b", l))
	}
	time.Sleep(ttl / 2)
	// The crash: a's process can reach nothing any more; its work stops
	// within the renew deadline. The restarted process comes up at once.
	old.failWrites.Store("/")
	old.stall.Store(true)
	testutil.Eventually(t, 5*time.Second, testutil.Check("a's old work to stop", func() bool {
		for _, in := range a {
			if in.leads() {
				return false
			}
		}
		return true
	}))
	restarted := newFaultLink(t, c)
	var a2 []*instance
	for i := range n {
		a2 = append(a2, sessionElection(t, restarted, leaseSpec(ns, fmt.Sprintf("rs-%d", i), "a"), "a-new", l))
	}
	// The restarted process leaves the records of its predecessor alone
	// until their lease has passed by its own observation: whoever sees
	// them expire first, b or the restarted a, takes each election, and
	// nobody leads beside the old work.
	testutil.Eventually(t, 10*time.Second, testutil.Check("every election to have one leader, b or the restarted a", func() bool {
		for i := range n {
			if a2[i].leads() == b[i].leads() {
				return false
			}
		}
		return true
	}))
	testutil.Eventually(t, 5*time.Second, testutil.Check("the restarted a's records to name its new token", func() bool {
		newToken := sessionTokenOf(t, c, ns, "a")
		if newToken == oldToken || newToken == "" {
			return false
		}
		for i := range n {
			if !a2[i].leads() {
				continue
			}
			holder, mark := sessionMark(t, c, ns, fmt.Sprintf("rs-%d", i))
			if holder != "a" || !strings.HasSuffix(mark.Session, "/"+newToken) {
				return false
			}
		}
		return true
	}))
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders ran at once: %+v", o)
	}
}

// Stopping every election of a process that leaves its locks to expire
// (no release) ends its session gracefully: the session Lease is deleted,
// and the follower takes over within a lease although a's records are
// older than that (a graceful end counts at once: see TestViewJudgesEachTokenByItsOwnRenewals).
func TestGracefulStopEndsSession(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	const n = 3
	l := &ledger.Ledger{}
	aLink, bLink := newFaultLink(t, c), newFaultLink(t, c)
	var a, b []*instance
	for i := range n {
		a = append(a, sessionElection(t, aLink, leaseSpec(ns, fmt.Sprintf("gs-%d", i), "a"), "a", l, election.WithReleaseOnCancel(false)))
	}
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead all", func() bool {
		return len(leaders(a...)) == n
	}))
	for i := range n {
		b = append(b, sessionElection(t, bLink, leaseSpec(ns, fmt.Sprintf("gs-%d", i), "b"), "b", l))
	}
	time.Sleep(2 * ttl) // a's records are older than a lease: only the session keeps them
	if got := sessionLeases(t, c, ns); len(got) != 2 {
		t.Fatalf("session Leases %v, want a's and b's", got)
	}
	var wg sync.WaitGroup
	for _, in := range a {
		wg.Go(in.stop)
	}
	wg.Wait()
	stopped := time.Now()
	if _, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), session.LeaseName("a", ttl), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a's session Lease after every election stopped: %v, want it deleted", err)
	}
	took := testutil.Eventually(t, 10*time.Second, testutil.Check("b to lead all", func() bool { return len(leaders(b...)) == n }))
	if took > ttl+ttl/4 {
		t.Errorf("b took %v after a's session ended to lead every election; want at most a lease (%v)", took, ttl)
	}
	t.Logf("b led every election %v after a stopped", time.Since(stopped).Round(time.Millisecond))
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders ran at once: %+v", o)
	}
}

// Default-revision flips between session holders go by handover, with no
// overlap and no forced steal; the settled holder makes no requests for its
// lock (sessions need a Lease lock, whose watch also carries the sessions).
func TestLeaseSessionFlips(t *testing.T) {
	t.Parallel()
	runSessionFlips(t, election.LeaseLock, "/leases/"+election.NamespaceController)
}

func runSessionFlips(t *testing.T, kind election.LockKind, lockPath string) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	l := &ledger.Ledger{}
	m := &countingMetrics{}
	setDefaultRevision(t, c.Client, ns, "canary")
	spec := func(identity, rev string) election.Spec {
		return election.Spec{Namespace: ns, ElectionID: election.NamespaceController, Identity: identity, Revision: rev, Lock: kind}
	}
	canaryLink, stableLink := newFaultLink(t, c), newFaultLink(t, c)
	canary := sessionElection(t, canaryLink, spec("canary-1", "canary"), "canary-1", l, testknobs.Metrics(m))
	testutil.Eventually(t, 10*time.Second, testutil.Check("canary to lead", canary.leads))
	stable := sessionElection(t, stableLink, spec("stable-1", "stable"), "stable-1", l, testknobs.Metrics(m))
	time.Sleep(ttl)
	const flips = 6
	for i := range flips {
		want, other, rev := stable, canary, "stable"
		if i%2 == 1 {
			want, other, rev = canary, stable, "canary"
		}
		setDefaultRevision(t, c.Client, ns, rev)
		testutil.Eventually(t, 10*time.Second, testutil.Check(want.name+" to lead after flip", func() bool { return want.leads() && !other.leads() }))
		time.Sleep(ttl / 2)
	}
	if kind == election.ConfigMapLock {
		rec, cm := configMapRecord(t, c.Client, ns, election.NamespaceController)
		if rec.HolderIdentity != "canary-1" || rec.LeaderTransitions != flips {
			t.Errorf("holder %q after %d transitions; want canary-1 after %d", rec.HolderIdentity, rec.LeaderTransitions, flips)
		}
		var mark lockmeta.SessionMark
		if err := jsonUnmarshal(cm.Annotations[lockmeta.SessionAnnotationKey], &mark); err != nil || mark.Holder != "canary-1" {
			t.Errorf("session mark %q (%v), want one of canary-1", cm.Annotations[lockmeta.SessionAnnotationKey], err)
		}
	} else if holder, mark := sessionMark(t, c, ns, election.NamespaceController); holder != "canary-1" || mark.Holder != "canary-1" || mark.Session == "" {
		t.Errorf("holder %q with mark %+v; want canary-1 naming its session", holder, mark)
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders ran at once: %+v", o)
	}
	if handed, stolen := m.count("handedOver"), m.count("stole"); handed != flips || stolen != 0 {
		t.Errorf("handovers = %d, forced steals = %d; want %d and 0", handed, stolen, flips)
	}
	// Settled: the holder renews through its session only.
	time.Sleep(ttl)
	before := canaryLink.countMatching(lockPath)
	time.Sleep(2 * ttl)
	if got := canaryLink.countMatching(lockPath) - before; got > 0 {
		t.Errorf("the settled session holder made %d requests for its lock in %v, want none", got, 2*ttl)
	}
}

// Control for the stalled-watch case with sessions: a holder without
// sessions whose watch stalls still notices a forced steal at its next
// renew, before the stealer's fence, so the two never run together.
func TestStalledWatchWithoutSessionsNoticesSteal(t *testing.T) {
	t.Parallel()
	runStalledWatchSteal(t, false, true)
}

// A forced steal from a session holder (no handover) with working watches:
// the stealer's fence covers the holder's session, and the holder stops
// when it sees the steal, before the stealer starts.
func TestForcedStealFromSessionHolder(t *testing.T) {
	t.Parallel()
	runStalledWatchSteal(t, true, false)
}

// runStalledWatchSteal: a (revision canary) leads a prioritized Lease
// election; its watches stall; the default flips to stable and b (stable)
// takes the lock by force (no handover). a must stop before b starts.
func runStalledWatchSteal(t *testing.T, sessions, stall bool) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	l := &ledger.Ledger{}
	setDefaultRevision(t, c.Client, ns, "canary")
	spec := func(identity, rev string) election.Spec {
		return election.Spec{Namespace: ns, ElectionID: "steal", Identity: identity, Revision: rev, Lock: election.LeaseLock}
	}
	start := func(link *faultLink, identity, rev string) *instance {
		le, err := election.New(link.client, spec(identity, rev), link.opts(t, election.WithSessions(sessions),
			election.WithHandover(false, 0), election.WithReleaseOnCancel(false))...)
		return ledgered(t, l, identity, le, err)
	}
	aLink, bLink := newFaultLink(t, c), newFaultLink(t, c)
	// Only the Lease watch stalls: a keeps seeing the default revision
	// change, so it does not try to take the lock back.
	aLink.stallOnly = "/leases"
	a := start(aLink, "a", "canary")
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
	b := start(bLink, "b", "stable")
	time.Sleep(ttl)
	aLink.stall.Store(stall)
	flipAt := time.Now()
	setDefaultRevision(t, c.Client, ns, "stable")
	testutil.Eventually(t, 10*time.Second, testutil.Check("b to lead", b.leads))
	if gap := b.lastStart().Sub(flipAt); sessions && gap < ttl-ttl/4-50*time.Millisecond {
		// a's record is older than a lease: only a fence that counts a's
		// session (seen renewed at most a retry period before the steal)
		// keeps b from starting at once.
		t.Errorf("b started %v after the flip; its fence should have waited about a lease (%v) for a's session", gap.Round(time.Millisecond), ttl)
	}
	time.Sleep(ttl / 2)
	if holder, _ := sessionMark(t, c, ns, "steal"); holder != "b" {
		t.Fatalf("holder %q, want b", holder)
	}
	if a.leads() {
		t.Errorf("a still runs its work %v after b started: it never noticed the steal", time.Since(b.lastStart()).Round(time.Millisecond))
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Errorf("two leaders ran at once: %+v", o)
	}
}

func jsonUnmarshal(raw string, v any) error { return json.Unmarshal([]byte(raw), v) }

// Control for the stalled-follower case with sessions: a follower without
// sessions whose watch stalls keeps away from a live holder, because its
// write over the version it last saw conflicts with the holder's renewals.
func TestStalledFollowerWithoutSessionsKeepsAway(t *testing.T) {
	t.Parallel()
	runStalledFollower(t, false)
}

// runStalledFollower: a leads; b's watch of Leases stalls (b sees neither
// a's record nor a's session any more). b must not take the lock from the
// live holder a.
func runStalledFollower(t *testing.T, sessions bool) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	l := &ledger.Ledger{}
	start := func(link *faultLink, identity string) *instance {
		le, err := election.New(link.client, leaseSpec(ns, "sf", identity), link.opts(t, election.WithSessions(sessions))...)
		return ledgered(t, l, identity, le, err)
	}
	aLink, bLink := newFaultLink(t, c), newFaultLink(t, c)
	bLink.stallOnly = "/leases"
	a := start(aLink, "a")
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
	b := start(bLink, "b")
	time.Sleep(ttl)
	bLink.stall.Store(true)
	stallAt := time.Now()
	time.Sleep(3 * ttl)
	for _, iv := range l.Intervals() {
		if iv.Holder == b.name {
			t.Errorf("b ran its work from %v after the stall while a was alive", iv.Start.Sub(stallAt).Round(time.Millisecond))
		}
	}
	if holder, _ := sessionMark(t, c, ns, "sf"); holder != "a" {
		t.Errorf("holder %q, want a", holder)
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Errorf("two leaders ran at once: %+v", o)
	}
}
