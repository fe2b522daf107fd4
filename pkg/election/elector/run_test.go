package elector

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// stepUntil advances the fake clock by d whenever a timer waits, until cond
// holds or a real-time deadline passes.
func (h *harness) stepUntil(d time.Duration, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatal("condition not reached")
		}
		if h.clock.HasWaiters() {
			h.clock.Step(d)
		}
		time.Sleep(time.Millisecond)
	}
}

// journal records, in order, what happened during a run.
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, s)
}

func (j *journal) has(s string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.entries {
		if e == s {
			return true
		}
	}
	return false
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.entries...)
}

// watchReleases journals every update that writes an empty holder.
func (h *harness) watchReleases(j *journal) {
	h.client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rec, err := resourcelock.DecodeRecord([]byte(a.(k8stesting.UpdateAction).GetObject().(interface{ GetAnnotations() map[string]string }).GetAnnotations()[resourcelock.LeaderAnnotationKey]))
		if err == nil && rec.HolderIdentity == "" {
			j.add("released")
		}
		return false, nil, nil
	})
}

func TestCancelStopsWorkBeforeRelease(t *testing.T) {
	h := newHarness(t)
	j := &journal{}
	h.watchReleases(j)
	le := h.elector("a", "", nil, func(ctx context.Context) {
		j.add("started")
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // slow shutdown must still finish first
		j.add("stopped")
	})
	le.cfg.StopTimeout = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ctx) }()
	h.stepUntil(time.Second, func() bool { return j.has("started") })
	if !le.IsLeader() {
		t.Fatal("not leader after start")
	}
	cancel()
	<-done
	got := j.list()
	want := []string{"started", "stopped", "released"}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("order = %q, want %q", got, want)
	}
	if le.IsLeader() {
		t.Fatal("still leader after Run returned")
	}
	if rec := h.record(); rec.HolderIdentity != "" {
		t.Fatalf("not released: %+v", rec)
	}
}

func TestTakeoverEndsTermWithoutRelease(t *testing.T) {
	h := newHarness(t)
	j := &journal{}
	h.watchReleases(j)
	var stopped sync.WaitGroup
	stopped.Add(1)
	le := h.elector("a", "", nil, func(ctx context.Context) {
		j.add("started")
		<-ctx.Done()
		stopped.Done()
	})
	done := make(chan struct{})
	go func() { defer close(done); le.Run(context.Background()) }()
	h.stepUntil(time.Second, func() bool { return j.has("started") })
	h.writeRecord(held("b", "", 4))
	// The next renew reads b's record and ends the term at once.
	h.stepUntil(time.Second, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	stopped.Wait()
	if j.has("released") {
		t.Fatal("a released a lock it no longer held")
	}
	if rec := h.record(); rec.HolderIdentity != "b" {
		t.Fatalf("holder = %q, want b", rec.HolderIdentity)
	}
}

func TestRenewDeadlineEndsTerm(t *testing.T) {
	h := newHarness(t)
	// The reactor is installed before the elector runs (the fake clientset
	// must not be changed while in use) and switched on below.
	var down atomic.Bool
	var mu sync.Mutex
	calls := 0
	h.client.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !down.Load() {
			return false, nil, nil
		}
		mu.Lock()
		calls++
		mu.Unlock()
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	started := make(chan struct{})
	le := h.elector("a", "", nil, func(ctx context.Context) { close(started); <-ctx.Done() })
	done := make(chan struct{})
	go func() { defer close(done); le.Run(context.Background()) }()
	h.stepUntil(time.Second, func() bool {
		select {
		case <-started:
			return true
		default:
			return false
		}
	})
	// From now on the API server is unreachable.
	down.Store(true)
	h.stepUntil(500*time.Millisecond, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if elapsed := h.clock.Since(t0); elapsed > 4*time.Second {
		t.Fatalf("term ended after %v of fake time, want within the lease (4s)", elapsed)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls == 0 {
		t.Fatal("no renew was attempted")
	}
}

func TestCheckReportsStaleLeader(t *testing.T) {
	h := newHarness(t)
	le := h.elector("a", "", nil, nil)
	if err := le.Check(0); err != nil {
		t.Fatalf("follower unhealthy: %v", err)
	}
	mustAttempt(t, le, false, acquired)
	le.setLeading(true)
	h.clock.Step(4 * time.Second)
	if err := le.Check(time.Second); err != nil {
		t.Fatalf("fresh leader unhealthy: %v", err)
	}
	h.clock.Step(1001 * time.Millisecond)
	if err := le.Check(time.Second); err == nil {
		t.Fatal("leader that has not renewed for lease+tolerance reported healthy")
	}
}

// A slow winning write leaves less than a RetryPeriod before the renew
// deadline; the leader must still renew in time instead of ending its term
// at the deadline without trying.
func TestSlowAcquireStillRenewsBeforeTheDeadline(t *testing.T) {
	h := newHarness(t)
	// The create that wins the term takes 1.5s of the 2s renew deadline.
	var slow sync.Once
	h.client.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		slow.Do(func() { h.clock.Step(1500 * time.Millisecond) })
		return false, nil, nil
	})
	started := make(chan struct{})
	le := h.elector("a", "", nil, func(ctx context.Context) { close(started); <-ctx.Done() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-started
	h.client.ClearActions()
	// Advance in small steps past the original deadline (0.5s after the
	// term began) and well beyond: the leader must renew and keep leading.
	for i := 0; i < 30; i++ {
		waitFor(t, "a timer", h.clock.HasWaiters)
		h.clock.Step(100 * time.Millisecond)
		time.Sleep(2 * time.Millisecond)
	}
	if !le.IsLeader() {
		t.Fatal("the term ended at the renew deadline without a renew")
	}
	renewed := 0
	for _, v := range kubetest.Verbs(h.client) {
		if v == "update configmaps" {
			renewed++
		}
	}
	if renewed < 2 {
		t.Fatalf("renewals after a slow acquire = %d, want at least 2 (verbs %v)", renewed, kubetest.Verbs(h.client))
	}
}

// waitDone is a run callback that works until its term ends.
func waitDone(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// noErr adapts a callback without a result.
func noErr(f func(context.Context)) func(context.Context) error {
	return func(ctx context.Context) error {
		f(ctx)
		return nil
	}
}
