package elector

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/lockwatch"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A follower whose watch of Leases did not work while the holder's
// session began (a restart under a new token) never sees that session if
// its Lease is deleted before the watch lists again: the holder creates it
// again only at its next heartbeat. The follower must count that session
// as renewed when its watch began to work, for a lease, and not as over:
// the record's own lease, timed from an older read, is long past, since a
// holder in session mode does not rewrite its record, and the follower's
// own echo proves nothing about a Lease the list could not show.
func TestFollowerCountsAnUnseenSessionAliveFromWhenItsWatchWorks(t *testing.T) {
	const lease = 4 * time.Second
	h := newLeaseHarness(t)
	h.writeRecord(held("a", "", int(lease/time.Second)))
	holderRef := session.Ref(session.LeaseName("a", lease), "restarted")
	h.writeMark(lockmeta.SessionMark{Holder: "a", Session: holderRef})

	// The watch of Leases cannot list until the test lets it.
	var listing atomic.Bool
	h.client.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !listing.Load() {
			return true, nil, apierrors.NewServiceUnavailable("injected: the watch of Leases is broken")
		}
		return false, nil, nil
	})
	hub := lockwatch.NewWatchHub()
	member, err := session.NewMember(session.Config{
		Client: h.client, Namespace: ns, Identity: "b",
		LeaseDuration: lease, RenewDeadline: lease / 2, RetryPeriod: lease / 4,
		Clock: h.clock, Sessions: session.NewSessions(hub),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := member.Start()
	t.Cleanup(stop)
	lock, err := resourcelock.NewLeaseLock(h.client.CoordinationV1(), ns, lockName, resourcelock.Config{Identity: "b"})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: lease, RenewDeadline: lease / 2, RetryPeriod: lease / 4,
		Callbacks: Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })},
		Watch:     true, Hub: hub, Session: inSession(lock, lease/4, member), Clock: h.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	le.watch.MarkHealthy(false) // the follower polls the lock meanwhile

	// The follower reads the record at t0 and polls on past the record's
	// own lease, unable to tell whether the holder's session lives.
	mustAttempt(t, le, false, heldByOther)
	h.clock.SetTime(t0.Add(lease + time.Second))
	mustAttempt(t, le, false, heldByOther)

	// The watch works again: its list holds the follower's own session
	// Lease but not the holder's, deleted meanwhile.
	listing.Store(true)
	waitFor(t, "the watch of Leases to list", func() bool {
		_, known := member.AliveUntil(holderRef)
		return known
	})
	healed := h.clock.Now()
	if until, _ := member.AliveUntil(holderRef); until.Before(healed.Add(lease)) {
		t.Errorf("a session the watch never saw is alive until %v; want a lease from when the watch worked, %v", until, healed.Add(lease))
	}
	// However long the follower waits for its own echo, it must not take
	// the lock within a lease of the watch working again.
	for h.clock.Now().Before(healed.Add(lease / 2)) {
		if out, err := le.attempt(context.Background(), false); out == acquired {
			t.Fatalf("at %v, %v after the watch worked again, the follower took the lock of a holder whose session it never saw",
				h.clock.Now().Sub(t0), h.clock.Now().Sub(healed))
		} else if err != nil {
			t.Fatal(err)
		}
		h.clock.Step(100 * time.Millisecond)
		time.Sleep(20 * time.Millisecond) // the follower's own heartbeat comes back
	}
	// A session that never shows up does not keep the lock for ever.
	h.clock.SetTime(healed.Add(lease + time.Millisecond))
	waitFor(t, "the follower to take the lock of a session that never showed up", func() bool {
		out, _ := le.attempt(context.Background(), false)
		if out != acquired {
			h.clock.Step(10 * time.Millisecond)
		}
		return out == acquired
	})
}
