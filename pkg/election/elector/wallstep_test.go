package elector

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/meshd-io/meshd/internal/testing/monotime"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// steppedClock is a fake clock whose wall clock can be stepped apart from
// its monotonic one, as time.Now's on a machine whose clock NTP or an
// operator steps: Now's wall reading is the fake time plus the step, its
// monotonic reading the fake time.
type steppedClock struct {
	*clocktesting.FakeClock
	wall atomic.Int64 // the step, in nanoseconds
}

func (c *steppedClock) Now() time.Time {
	now := c.FakeClock.Now()
	return monotime.WithMonotonic(now.Add(time.Duration(c.wall.Load())), now.Sub(t0)+time.Hour)
}

func (c *steppedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestRenewTimesKeepRisingWhenTheWallClockStepsBack: a leader whose wall
// clock steps back 4 s goes on writing records that no follower saw
// before. A follower of client-go's shape tells a renewal by a change of
// the record's bytes, with times in whole seconds; had the renew times
// followed the wall clock back, the record it saw last could come back,
// and it would take the lock a lease after that old sight while this
// leader works on.
func TestRenewTimesKeepRisingWhenTheWallClockStepsBack(t *testing.T) {
	if err := monotime.CheckLayout(); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	clk := &steppedClock{FakeClock: h.clock}
	var (
		mu      sync.Mutex
		records []string
	)
	h.client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		switch a := a.(type) {
		case k8stesting.CreateAction:
			obj = a.GetObject()
		case k8stesting.UpdateAction:
			obj = a.GetObject()
		default:
			return false, nil, nil
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			mu.Lock()
			records = append(records, cm.Annotations[resourcelock.LeaderAnnotationKey])
			mu.Unlock()
		}
		return false, nil, nil
	})
	lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a", Key: "stable"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:       Callbacks{OnStartedLeading: waitDone},
		ReleaseOnCancel: true,
		Clock:           clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := h.run(le)
	defer c.stop()
	waitFor(t, "a to lead", le.IsLeader)
	// Each step waits for the leader to park on its renew timer (its only
	// timer), so every renewal falls due on a step however slow the
	// machine is.
	h.parkedSteps(3, time.Second, 1)
	clk.wall.Store(int64(-4 * time.Second))
	h.parkedSteps(8, time.Second, 1)
	// The fake clock now stands still 11 s after the first write, and the
	// renewal due then may still be on its way. Renew times that follow
	// the monotonic clock reach 11 s past the first; had they followed the
	// wall clock back they would stop near 7 s, and no wait would bring
	// them further.
	spanOfRenewals := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if len(records) < 2 {
			return 0
		}
		first, err1 := resourcelock.DecodeRecord([]byte(records[0]))
		last, err2 := resourcelock.DecodeRecord([]byte(records[len(records)-1]))
		if err1 != nil || err2 != nil {
			return 0 // reported below, write by write
		}
		return last.RenewTime.Sub(first.RenewTime.Time)
	}
	deadline := time.Now().Add(10 * time.Second)
	for spanOfRenewals() < 11*time.Second && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !le.IsLeader() {
		t.Fatal("the leader lost its term to a step of its wall clock")
	}
	mu.Lock()
	defer mu.Unlock()
	var renews []time.Time
	for i, raw := range records {
		rec, err := resourcelock.DecodeRecord([]byte(raw))
		if err != nil {
			t.Fatalf("write %d stored %q: %v", i, raw, err)
		}
		if i > 0 && raw != records[i-1] && slices.Contains(records[:i-1], raw) {
			t.Fatalf("write %d stored a record written before and changed since, %s: writes %q", i, raw, records)
		}
		renews = append(renews, rec.RenewTime.Time)
	}
	if len(renews) != 12 {
		t.Fatalf("%d writes in 11 s, want the first and a renewal every second: %q", len(renews), records)
	}
	for i := 1; i < len(renews); i++ {
		if renews[i].Before(renews[i-1]) {
			t.Fatalf("renew time %v stored after %v: renew times went back with the wall clock (%q)", renews[i], renews[i-1], records)
		}
	}
	if first, last := renews[0], renews[len(renews)-1]; last.Sub(first) < 11*time.Second {
		t.Fatalf("renew times span %v over 11 s of renewals, want them to follow the monotonic clock %q", last.Sub(first), records)
	}
}
