package elector

import (
	"context"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("the runtime does not count the goroutines it creates (%v)", s[0].Value.Kind())
	}
	return s[0].Value.Uint64()
}

// A holder that leaves its renewals to its session takes a renew tick the
// session answered on its own goroutine: no request and no goroutine
// started. Handing each tick to a goroutine of its own, as a tick that
// renews is, cost an idle process in session mode a goroutine start and a
// thread woken per tick of every election it leads.
func TestSessionRenewTicksStartNoGoroutine(t *testing.T) {
	const retry = 20 * time.Millisecond
	h := newLeaseHarness(t) // its clientset; the elector keeps the real clock
	client := h.client
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, lockName, client, resourcelock.Config{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	all := &sharedSessions{lease: time.Minute, alive: map[string]bool{}}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: retry,
		Callbacks: Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })},
		Watch:     true,
		Session:   inSession(lock, retry, all.of("session-a/token")),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.run(le)
	waitFor(t, "a to lead", le.IsLeader)
	// Until it has written once with its watch healthy the holder renews
	// its record itself; then its session renews it.
	requests := func() int { return len(kubetest.Verbs(client)) }
	waitFor(t, "the holder to leave its renewals to its session", func() bool {
		before := requests()
		time.Sleep(5 * retry)
		return requests() == before
	})

	const ticks = 50
	beforeRequests, beforeCreated := requests(), goroutinesCreated(t)
	time.Sleep(ticks * retry)
	sent, created := requests()-beforeRequests, goroutinesCreated(t)-beforeCreated
	if !le.IsLeader() {
		t.Fatal("the holder lost the lock while its session renewed it")
	}
	if sent != 0 {
		t.Errorf("%d requests in %d renew periods; the session renews the record", sent, ticks)
	}
	// A few goroutines may start elsewhere in the process (the test's own
	// waits, the fake clientset); one per tick is the fault.
	if created >= ticks/4 {
		t.Errorf("%d goroutines started in %d renew periods of a holder renewed by its session; want none per tick", created, ticks)
	}
}
