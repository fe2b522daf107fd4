package session

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(client *fake.Clientset, clk *clocktesting.FakeClock) Config {
	return Config{Client: client, Namespace: "ns", Identity: "a",
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second, Clock: clk,
		Sessions: NewSessions(lockwatch.NewWatchHub())}
}

func leaseVerbs(c *fake.Clientset) []string {
	var out []string
	for _, v := range kubetest.Verbs(c) {
		if v != "" {
			out = append(out, v)
		}
	}
	c.ClearActions()
	return out
}

// The heartbeat creates its Lease once, then renews it with one update
// and no read; only a conflict or a deletion makes it read or create.
func TestHeartbeatVerbs(t *testing.T) {
	client := kubetest.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	h := newHeartbeat(testConfig(client, clk), zapNop())
	ctx := context.Background()
	leases := client.CoordinationV1().Leases("ns")

	steps := []struct {
		what   string
		before func()
		want   []string
		ok     bool
		check  func()
	}{
		{"first: read, then create", nil, []string{"get leases", "create leases"}, true, nil},
		{"then one update", nil, []string{"update leases"}, true, nil},
		{"after a foreign write: conflict, read, update", func() {
			l, _ := leases.Get(ctx, h.name, metav1.GetOptions{})
			l.Labels["other"] = "x"
			if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []string{"update leases", "get leases", "update leases"}, true, func() {
			if l, err := leases.Get(ctx, h.name, metav1.GetOptions{}); err != nil || l.Labels["other"] != "x" {
				t.Errorf("the heartbeat dropped a foreign label: %v", err)
			}
		}},
		{"after a deletion: update, read, create", func() {
			if err := leases.Delete(ctx, h.name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []string{"update leases", "get leases", "create leases"}, true, nil},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
			client.ClearActions()
		}
		clk.Step(time.Second)
		if ok := h.renewOnce(ctx); ok != s.ok {
			t.Fatalf("%s: renewOnce = %v", s.what, ok)
		}
		if got := leaseVerbs(client); !slices.Equal(got, s.want) {
			t.Errorf("%s: verbs %v, want %v", s.what, got, s.want)
		}
		if s.check != nil {
			s.check()
			client.ClearActions()
		}
		if sent := h.renewed(); !sent.Equal(clk.Now()) {
			t.Errorf("%s: renewed() = %v, want now", s.what, sent)
		}
	}
	l, err := leases.Get(ctx, h.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Labels[Label] != "true" || l.Annotations[TokenAnnotation] != h.token ||
		*l.Spec.HolderIdentity != "a" || *l.Spec.LeaseDurationSeconds != 4 || !l.Spec.RenewTime.Time.Equal(clk.Now()) {
		t.Errorf("session Lease is %+v / %+v", l.ObjectMeta, l.Spec)
	}

	// A failure leaves the last success.
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	last := clk.Now()
	clk.Step(time.Second)
	if h.renewOnce(ctx) {
		t.Fatal("a failed write reported success")
	}
	if sent := h.renewed(); !sent.Equal(last) {
		t.Errorf("after a failure: renewed() = %v, want the last success %v", sent, last)
	}
}

// Members of one key share one heartbeat; the last to leave ends the
// session (clears the holder, then deletes the Lease) and stops every
// goroutine (goleak).
func TestMembersShareOneSessionAndTheLastEndsIt(t *testing.T) {
	client := kubetest.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	cfg := testConfig(client, clk)
	a, err := NewMember(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewMember(cfg)
	other := cfg
	other.Identity = "b"
	c, _ := NewMember(other)
	if a.Ref() != "" {
		t.Error("a member that has not started names a session")
	}
	stopA, stopB, stopC := a.Start(), b.Start(), c.Start()
	if a.Ref() == "" || a.Ref() != b.Ref() || a.Ref() == c.Ref() {
		t.Errorf("refs a %q b %q c %q; want a = b != c", a.Ref(), b.Ref(), c.Ref())
	}
	leases := client.CoordinationV1().Leases("ns")
	waitFor(t, "both session Leases", func() bool {
		l, err := leases.List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 2
	})
	stopA()
	if _, err := leases.Get(context.Background(), a.LeaseName(), metav1.GetOptions{}); err != nil {
		t.Errorf("the session ended while a member still runs: %v", err)
	}
	if b.Ref() == "" {
		t.Error("b lost its session when a left")
	}
	client.ClearActions()
	stopB()
	if got := leaseVerbs(client); !slices.Equal(got, []string{"update leases", "delete leases"}) {
		t.Errorf("ending the session sent %v, want an update (no holder) and a delete", got)
	}
	if _, err := leases.Get(context.Background(), a.LeaseName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ended session's Lease is still there: %v", err)
	}
	stopC()
	stopC() // twice is harmless
	if b.Ref() != "" {
		t.Error("a stopped member still names a session")
	}
}

func TestConfigValidation(t *testing.T) {
	_, err := NewMember(Config{Namespace: "Bad_NS", LeaseDuration: time.Second, RenewDeadline: 2 * time.Second})
	if err == nil {
		t.Fatal("an invalid config was accepted")
	}
	for _, want := range []string{"Client", "namespace", "Identity", "timing", "Sessions"} {
		if !contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// EchoedSince asks for a heartbeat when none sent since t came back, and
// calls back once it does; the view is fed by the shared watch.
func TestEchoedSinceSendsAHeartbeatAndCallsBack(t *testing.T) {
	client := kubetest.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	m, err := NewMember(testConfig(client, clk))
	if err != nil {
		t.Fatal(err)
	}
	if m.EchoedSince(1, nil) {
		t.Error("a member that has not started claims an echo")
	}
	stop := m.Start()
	defer stop()
	waitFor(t, "the first heartbeat to come back", func() bool { sent, _ := m.Renewed(); return sent.Equal(t0) })
	if sent, current := m.Renewed(); !sent.Equal(t0) || !current {
		t.Errorf("Renewed() = %v, %v; want the echoed heartbeat of t0, current", sent, current)
	}
	asked := uint64(2)
	clk.Step(100 * time.Millisecond) // no timer fires: only a kick sends now
	called := make(chan struct{}, 1)
	if m.EchoedSince(asked, func() { called <- struct{}{} }) {
		t.Fatal("an echo from before the judgement counted")
	}
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat came back after asking")
	}
	if !m.EchoedSince(asked, nil) {
		t.Error("the heartbeat sent on request does not count as sent since then")
	}
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	clk.Step(2 * time.Second)
	if _, current := m.Renewed(); current {
		t.Error("a session whose last echo is two retry periods old is current")
	}
}

// A heartbeat sent before a judgement, at the same clock reading or not,
// proves nothing about it: it may come back in the list
// the judgement was made from, where a list delivers the Leases in the
// order of their names, not of their writes. The holder's Lease (renewed
// under a new token by a restarted process) may follow in that list; a
// follower that took this echo for proof took the lock while the holder
// worked (session seed 200010849 of the simulation). Only a heartbeat sent
// after the judgement counts.
func TestEchoedSinceNeedsAHeartbeatSentAfterT(t *testing.T) {
	client := kubetest.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	m := startedMember(t, client, clk)
	judged := uint64(1) // judged after the heartbeat that came back was sent
	if m.EchoedSince(judged, nil) {
		t.Fatal("a heartbeat sent before the judgement counted as sent after it")
	}
	clk.Step(10 * time.Millisecond)
	waitFor(t, "a heartbeat sent after the judgement to come back", func() bool { return m.EchoedSince(judged, nil) })
}

// A renew whose answer was lost (the heartbeat stopped while it was in
// flight) leaves the Lease at a version the heartbeat has not seen. Ending
// the session then reads the Lease again and ends it while it still
// carries this session's token; a Lease another session of the same
// identity has taken over is left as it is.
func TestEndAfterALostRenewReadsTheLeaseAgain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		token     func(h *heartbeat) string
		want      []string
		wantGone  bool
		wantOwner string
	}{
		{"still this session's", func(h *heartbeat) string { return h.token },
			[]string{"update leases", "get leases", "update leases", "delete leases"}, true, ""},
		{"taken over by another session", func(*heartbeat) string { return "other-token" },
			[]string{"update leases", "get leases"}, false, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := kubetest.NewClientset()
			clk := clocktesting.NewFakeClock(t0)
			h := newHeartbeat(testConfig(client, clk), zapNop())
			ctx := context.Background()
			if !h.renewOnce(ctx) {
				t.Fatal("the first heartbeat failed")
			}
			leases := client.CoordinationV1().Leases("ns")
			l, err := leases.Get(ctx, h.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The write the heartbeat never heard back from.
			l.Annotations[TokenAnnotation] = tc.token(h)
			l.Spec.RenewTime = &metav1.MicroTime{Time: clk.Now().Add(time.Second)}
			if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			client.ClearActions()
			h.end()
			if got := leaseVerbs(client); !slices.Equal(got, tc.want) {
				t.Errorf("end sent %v, want %v", got, tc.want)
			}
			l, err = leases.Get(ctx, h.name, metav1.GetOptions{})
			switch {
			case tc.wantGone && !apierrors.IsNotFound(err):
				t.Errorf("the session's Lease is still there after end: %v", err)
			case !tc.wantGone && err != nil:
				t.Errorf("end removed another session's Lease: %v", err)
			case !tc.wantGone && (l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != tc.wantOwner):
				t.Errorf("end cleared another session's holder: %+v", l.Spec)
			}
		})
	}
}
