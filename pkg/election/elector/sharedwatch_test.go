package elector

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/internal/pacing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

func heldLease(name, holder string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	resourcelock.ApplyRecordToLease(resourcelock.Record{
		HolderIdentity: holder, LeaseDurationSeconds: 30, AcquireTime: metav1.NewTime(t0), RenewTime: metav1.NewTime(t0),
	}, l)
	return l
}

// shared is what the electors of one test program share: nil fields give
// each elector its own.
type shared struct {
	hub   *lockwatch.WatchHub
	pacer *pacing.Pacer
}

// newShared returns a hub and a pacer for the electors of one program.
func newShared() shared { return shared{hub: lockwatch.NewWatchHub(), pacer: pacing.NewPacer()} }

// runWatching runs a watching elector on the Lease name until the test ends,
// sharing what sh holds with the other electors given it.
func runWatching(t *testing.T, client *fake.Clientset, clk *clocktesting.FakeClock, sh shared, name, identity string) *LeaderElector {
	t.Helper()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, name, client, resourcelock.Config{Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Name: name, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:       Callbacks{OnStartedLeading: func(ctx context.Context) error { <-ctx.Done(); return nil }},
		ReleaseOnCancel: true, Watch: true, Clock: clk, Hub: sh.hub,
	}
	if sh.pacer != nil { // a nil *pacing.Pacer is no pacer, not an unbuilt one
		cfg.Pacer = sh.pacer
	}
	le, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			le.Run(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return le
}

func TestElectorsOfOneHubShareOneWatch(t *testing.T) {
	const n = 40
	tests := []struct {
		name      string
		held      bool // every Lease exists, held by another process
		wantVerbs map[string]int
	}{
		// Followers decide from the shared cache: no request of their own.
		{"followers", true, map[string]int{"list": 1, "watch": 1}},
		// Candidates of free locks create them, once each.
		{"free locks", false, map[string]int{"list": 1, "watch": 1, "create": n}},
	}
	sh := newShared()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			for i := range n {
				if tc.held {
					objs = append(objs, heldLease(fmt.Sprintf("lock-%d", i), "other"))
				}
			}
			client := kubetest.NewClientset(objs...)
			clk := clocktesting.NewFakeClock(t0)
			electors := make([]*LeaderElector, n)
			for i := range electors {
				electors[i] = runWatching(t, client, clk, sh, fmt.Sprintf("lock-%d", i), "me")
			}
			want := "me"
			if tc.held {
				want = "other"
			}
			for i, le := range electors {
				waitFor(t, fmt.Sprintf("elector %d to know its leader", i), func() bool { return le.GetLeader() == want })
			}
			kubetest.WaitForVerbs(t, client, "leases", tc.wantVerbs)
			if got := sh.hub.Watches(); got != 1 {
				t.Fatalf("the hub runs %d watches, want 1", got)
			}
		})
	}
	if got := sh.hub.Watches(); got != 0 {
		t.Fatalf("the hub still runs %d watches after every elector stopped", got)
	}
}

// TestElectorsOfTwoHubsNeverShareAWatch: two programs in one process (two
// hubs) on one client each open a watch of their own, and electors given no
// hub open one each: nothing is shared that the program did not pass in.
func TestElectorsOfTwoHubsNeverShareAWatch(t *testing.T) {
	client := kubetest.NewClientset(heldLease("lock-0", "other"), heldLease("lock-1", "other"))
	clk := clocktesting.NewFakeClock(t0)
	one, two := newShared(), newShared()
	electors := []*LeaderElector{
		runWatching(t, client, clk, one, "lock-0", "me"),
		runWatching(t, client, clk, two, "lock-0", "me"),
		runWatching(t, client, clk, shared{}, "lock-1", "me"),
		runWatching(t, client, clk, shared{}, "lock-1", "me"),
	}
	for i, le := range electors {
		waitFor(t, fmt.Sprintf("elector %d to know its leader", i), func() bool { return le.GetLeader() == "other" })
	}
	if one.hub.Watches() != 1 || two.hub.Watches() != 1 {
		t.Fatalf("hubs run %d and %d watches, want one each", one.hub.Watches(), two.hub.Watches())
	}
	// One list and one watch for each hub and each elector without one.
	kubetest.WaitForVerbs(t, client, "leases", map[string]int{"list": 4, "watch": 4})
}

func TestLastErrorIsClearedOnceTheLeaderIsKnown(t *testing.T) {
	client := kubetest.NewClientset()
	// The create times out while another process creates the lock.
	client.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if err := client.Tracker().Add(heldLease("lock", "winner")); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewTimeoutError("the create was not answered in time", 1)
	})
	le := runWatching(t, client, clocktesting.NewFakeClock(t0), newShared(), "lock", "me")
	waitFor(t, "the winner to be known", func() bool { return le.GetLeader() == "winner" })
	waitFor(t, "LastError to be cleared", func() bool { return le.LastError() == nil })
	if le.IsLeader() {
		t.Fatal("the loser leads")
	}
	if got := kubetest.CountVerbs(client, "leases"); got["create"] != 1 || got["get"] != 0 {
		t.Fatalf("requests %v: the leader should be learnt from the watch, with no further request", got)
	}
}

func TestElectorsJoinAndLeaveTheSharedWatchAtAnyTime(t *testing.T) {
	client := kubetest.NewClientset()
	clk := clocktesting.NewFakeClock(t0)
	sh := newShared()
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(i)))
			for range 5 {
				lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, fmt.Sprintf("lock-%d", i%4), client,
					resourcelock.Config{Identity: fmt.Sprintf("id-%d", i)})
				if err != nil {
					t.Error(err)
					return
				}
				le, err := New(Config{
					Name: "lock", Lock: lock,
					LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
					Callbacks:       Callbacks{OnStartedLeading: func(ctx context.Context) error { <-ctx.Done(); return nil }},
					ReleaseOnCancel: true, Watch: true, Clock: clk, Hub: sh.hub, Pacer: sh.pacer,
				})
				if err != nil {
					t.Error(err)
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.Intn(30))*time.Millisecond)
				le.Run(ctx)
				cancel()
			}
		}()
	}
	wg.Wait()
	if got := sh.hub.Watches(); got != 0 {
		t.Fatalf("the hub still runs %d watches after every elector returned", got)
	}
	// goleak (TestMain) checks that no goroutine of the hub outlives the test.
}

func TestFirstAttemptsOfOnePacerArePaced(t *testing.T) {
	const n = 2 * pacing.FirstAttemptBurst
	client := kubetest.NewClientset()
	var mu sync.Mutex
	var creates []time.Time
	client.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		creates = append(creates, time.Now())
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(t0)
	sh := newShared()
	electors := make([]*LeaderElector, n)
	for i := range electors {
		electors[i] = runWatching(t, client, clk, sh, fmt.Sprintf("lock-%d", i), "me")
	}
	for i, le := range electors {
		waitFor(t, fmt.Sprintf("elector %d to lead", i), le.IsLeader)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(creates) != n {
		t.Fatalf("%d creates for %d free locks", len(creates), n)
	}
	// At most a burst of first attempts goes out at once; the rest follow
	// at the pace of the limiter.
	minSpan := time.Duration(n-pacing.FirstAttemptBurst) * time.Second / pacing.FirstAttemptQPS
	if span := creates[n-1].Sub(creates[0]); span < minSpan*9/10 {
		t.Fatalf("%d first attempts went out within %v, want them spread over at least %v", n, span, minSpan)
	}
}

func TestFirstAttemptsInFlightAreBounded(t *testing.T) {
	const n = 3 * pacing.FirstAttemptsInFlight
	client := kubetest.NewClientset()
	var mu sync.Mutex
	inFlight, most := 0, 0
	client.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // a slow API server
		mu.Lock()
		inFlight--
		mu.Unlock()
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(t0)
	sh := newShared()
	electors := make([]*LeaderElector, n)
	for i := range electors {
		electors[i] = runWatching(t, client, clk, sh, fmt.Sprintf("lock-%d", i), "me")
	}
	for i, le := range electors {
		waitFor(t, fmt.Sprintf("elector %d to lead", i), le.IsLeader)
	}
	mu.Lock()
	defer mu.Unlock()
	if most > pacing.FirstAttemptsInFlight {
		t.Fatalf("%d first attempts were in flight at once, want at most %d", most, pacing.FirstAttemptsInFlight)
	}
}
