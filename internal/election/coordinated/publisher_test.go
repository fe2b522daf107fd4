package coordinated

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// eventually polls cond in real time for up to 10s; on failure it reports
// what the optional state functions return.
func eventually(t *testing.T, what string, cond func() bool, state ...func() string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		var seen []string
		for _, f := range state {
			seen = append(seen, f())
		}
		t.Fatalf("timed out waiting for %s %v", what, seen)
	}
}

// verbs returns the writes and reads of resource recorded by client, as
// "verb name" (list and watch left out).
func verbs(client *fake.Clientset, resource string) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource != resource || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		name := ""
		switch a := a.(type) {
		case k8stesting.CreateAction:
			name = a.GetObject().(metav1.Object).GetName()
		case k8stesting.UpdateAction:
			name = a.GetObject().(metav1.Object).GetName()
		case k8stesting.DeleteAction:
			name = a.GetName()
		case k8stesting.GetAction:
			name = a.GetName()
		}
		out = append(out, a.GetVerb()+" "+name)
	}
	return out
}

func testSpec() CandidateSpec {
	return CandidateSpec{
		Namespace: testNS, LeaseName: testLease, Identity: "istiod-1", Key: "stable",
		Preempts: true, BinaryVersion: "1.2.3", LeaseDuration: leaseDur,
	}
}

func TestNewPublisherValidates(t *testing.T) {
	client := fake.NewClientset()
	roster, release, err := NewRosters().Acquire(client, testNS, clocktesting.NewFakeClock(t0))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, tc := range []struct {
		name   string
		change func(*CandidateSpec)
		want   []string
	}{
		{"empty", func(s *CandidateSpec) { *s = CandidateSpec{} }, []string{"Namespace", "LeaseName", "Identity", "LeaseDuration", "Heartbeat"}},
		{"bad versions", func(s *CandidateSpec) { s.BinaryVersion, s.EmulationVersion = "1.0", "x" }, []string{"BinaryVersion", "EmulationVersion"}},
		{"emulation above binary", func(s *CandidateSpec) { s.EmulationVersion = "2.0.0" }, []string{"greater than BinaryVersion"}},
		{"bad strategy", func(s *CandidateSpec) { s.Strategy = "Prioritized" }, []string{"Strategy"}},
		{"bad name", func(s *CandidateSpec) { s.Name = "Not_Valid" }, []string{"Name"}},
		{"short heartbeat", func(s *CandidateSpec) { s.Heartbeat = time.Millisecond }, []string{"Heartbeat"}},
		{"incomplete owner", func(s *CandidateSpec) { s.Owner = &metav1.OwnerReference{Kind: "Pod"} }, []string{"Owner"}},
		{"other namespace", func(s *CandidateSpec) { s.Namespace = "other" }, []string{"roster of namespace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec()
			tc.change(&spec)
			_, err := NewPublisher(client, roster, spec, nil, nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	p, err := NewPublisher(client, roster, testSpec(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Spec()
	if s.Name != CandidateName(testLease, "istiod-1") || s.Strategy != Strategy || s.EmulationVersion != "1.2.3" || s.Heartbeat != 2*leaseDur {
		t.Fatalf("defaults not applied: %+v", s)
	}
}

// runPublisher starts a Publisher on a fake client and returns a stop
// function that returns Run's error.
func runPublisher(t *testing.T, client *fake.Clientset, clk *clocktesting.FakeClock, spec CandidateSpec) (*Publisher, func() error) {
	t.Helper()
	withResourceVersions(client)
	roster, release, err := NewRosters().Acquire(client, testNS, clk)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPublisher(client, roster, spec, zaptest.NewLogger(t), clk)
	if err != nil {
		release()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		runErr = p.Run(ctx)
	}()
	return p, func() error {
		cancel()
		wg.Wait()
		release()
		return runErr
	}
}

func TestPublisherVerbs(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	spec := testSpec()
	p, stop := runPublisher(t, client, clk, spec)
	name := p.Spec().Name
	lcs := client.CoordinationV1beta1().LeaseCandidates(testNS)
	get := func() *coordinationv1beta1.LeaseCandidate {
		lc, err := lcs.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return lc
	}
	renewedAt := func(at time.Time) func() bool {
		return func() bool {
			lc := get()
			return lc != nil && lc.Spec.RenewTime != nil && lc.Spec.RenewTime.Time.Equal(at)
		}
	}
	eventually(t, "the candidate is created", renewedAt(t0))
	lc := get()
	if lc.Spec.LeaseName != testLease || lc.Spec.Strategy != Strategy || lc.Spec.BinaryVersion != "1.2.3" ||
		lc.Annotations[HolderKeyAnnotation] != "stable" || lc.Annotations[PreemptsAnnotation] != "true" ||
		lc.Annotations[LeaseDurationAnnotation] != "10" || lc.Annotations[HeartbeatAnnotation] != "20" ||
		lc.Annotations[IdentityAnnotation] != "istiod-1" {
		t.Fatalf("created candidate %+v", lc)
	}

	// The publisher learns of pings and deletes through the Roster's watch:
	// let it see the candidate before changing anything.
	eventually(t, "the roster sees the candidate", func() bool { _, ok := p.roster.Get(name); return ok })

	// A heartbeat renews by update, without a read.
	eventually(t, "the heartbeat timer", clk.HasWaiters)
	clk.Step(2 * leaseDur)
	eventually(t, "a renewal", renewedAt(t0.Add(2*leaseDur)))
	eventually(t, "the roster sees the renewal", func() bool {
		lc, ok := p.roster.Get(name)
		return ok && lc.Spec.RenewTime.Time.Equal(t0.Add(2*leaseDur))
	})

	// Deleted by someone: created again as soon as the Roster shows it gone,
	// without waiting for the next heartbeat.
	if err := lcs.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the candidate is created again", func() bool {
		return strings.Count(strings.Join(verbs(client, "leasecandidates"), ","), "create ") == 2 && get() != nil
	}, func() string { return strings.Join(dropGets(verbs(client, "leasecandidates")), ",") })
	eventually(t, "the heartbeat timer", clk.HasWaiters)
	clk.Step(2 * leaseDur)
	eventually(t, "a renewal of the new object", renewedAt(t0.Add(4*leaseDur)))

	// A ping is answered at once, with a renewTime not before the ping even
	// when the pinger's clock is ahead.
	ping := t0.Add(4*leaseDur + 3*time.Second)
	eventually(t, "the roster sees the candidate", func() bool { _, ok := p.roster.Get(name); return ok })
	lc = get()
	lc.Spec.PingTime = &metav1.MicroTime{Time: ping}
	if _, err := lcs.Update(context.Background(), lc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ping is answered", renewedAt(ping))

	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if get() != nil {
		t.Fatal("candidate left behind after Run")
	}
	want := []string{
		"create " + name, "update " + name, // create, heartbeat
		"delete " + name, "update " + name, "create " + name, // deleted by the test; renew fails; re-create
		"update " + name,                   // heartbeat
		"update " + name, "update " + name, // the test's ping; the answer
		"delete " + name, // graceful stop
	}
	got := verbs(client, "leasecandidates")
	got = dropGets(got) // the test's own reads
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("verbs\n got %v\nwant %v", got, want)
	}
}

// dropGets removes reads: the test reads through the same fake client, and
// TestPublisherNoGet checks the publisher's own.
func dropGets(vs []string) []string {
	var out []string
	for _, v := range vs {
		if !strings.HasPrefix(v, "get ") {
			out = append(out, v)
		}
	}
	return out
}

func TestPublisherNoGet(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	p, stop := runPublisher(t, client, clk, testSpec())
	for i := 1; i <= 3; i++ {
		eventually(t, "the heartbeat timer", clk.HasWaiters)
		clk.Step(2 * leaseDur)
	}
	name := p.Spec().Name
	eventually(t, "three renewals", func() bool { return len(verbs(client, "leasecandidates")) >= 4 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := "create " + name + ",update " + name + ",update " + name + ",update " + name + ",delete " + name
	if got := strings.Join(verbs(client, "leasecandidates"), ","); got != want {
		t.Fatalf("verbs %s, want %s", got, want)
	}
}

func TestPublisherConflictReadsOnce(t *testing.T) {
	client := fake.NewClientset()
	conflicts := 0
	client.PrependReactor("update", "leasecandidates", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "leasecandidates"}, "x", errors.New("changed"))
		}
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(t0)
	p, stop := runPublisher(t, client, clk, testSpec())
	eventually(t, "the heartbeat timer", clk.HasWaiters)
	clk.Step(2 * leaseDur)
	name := p.Spec().Name
	eventually(t, "the retried renewal", func() bool { return len(verbs(client, "leasecandidates")) >= 4 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := "create " + name + ",update " + name + ",get " + name + ",update " + name + ",delete " + name
	if got := strings.Join(verbs(client, "leasecandidates"), ","); got != want {
		t.Fatalf("verbs %s, want %s", got, want)
	}
}

func TestPublisherAdoptsExisting(t *testing.T) {
	spec := testSpec()
	spec.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "istiod-1", UID: "uid-1"}
	name := CandidateName(spec.LeaseName, spec.Identity)
	old := &coordinationv1beta1.LeaseCandidate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS,
			Annotations: map[string]string{"example.com/foreign": "kept", HolderKeyAnnotation: "canary"}},
		Spec: coordinationv1beta1.LeaseCandidateSpec{LeaseName: testLease, Strategy: "example.com/other", BinaryVersion: "0.1.0"},
	}
	client := fake.NewClientset(old)
	clk := clocktesting.NewFakeClock(t0)
	_, stop := runPublisher(t, client, clk, spec)
	lcs := client.CoordinationV1beta1().LeaseCandidates(testNS)
	eventually(t, "the candidate is adopted", func() bool {
		lc, err := lcs.Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && lc.Spec.RenewTime != nil
	})
	lc, _ := lcs.Get(context.Background(), name, metav1.GetOptions{})
	if lc.Annotations["example.com/foreign"] != "kept" || lc.Annotations[HolderKeyAnnotation] != "stable" ||
		lc.Spec.Strategy != Strategy || lc.Spec.BinaryVersion != "1.2.3" ||
		len(lc.OwnerReferences) != 1 || lc.OwnerReferences[0].UID != "uid-1" {
		t.Fatalf("adopted candidate %+v", lc)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestPublisherRunTwice(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	p, stop := runPublisher(t, client, clk, testSpec())
	defer stop()
	eventually(t, "Run started", func() bool { return p.running.Load() })
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("second Run accepted")
	}
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{{1, retryMin}, {2, 2 * retryMin}, {3, 4 * retryMin}, {40, time.Second}} {
		if got := backoff(tc.failures, time.Second); got != tc.want {
			t.Errorf("backoff(%d) = %v, want %v", tc.failures, got, tc.want)
		}
	}
}
