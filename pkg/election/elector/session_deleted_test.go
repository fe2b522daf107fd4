package elector

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/protocol/sessions"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// sharedSessions stands for the sessions of several processes as every one
// of them observes them: a session is alive while it is in the set, and
// its heartbeat always works.
type sharedSessions struct {
	lease time.Duration
	mu    sync.Mutex
	alive map[string]bool
}

// of returns the session heartbeat of the process whose session is ref.
func (f *sharedSessions) of(ref string) sessions.Heartbeat {
	f.mu.Lock()
	f.alive[ref] = true
	f.mu.Unlock()
	return processSession{f, ref}
}

type processSession struct {
	all *sharedSessions
	ref string
}

func (s processSession) EchoedSince(uint64, func()) bool    { return true }
func (s processSession) Ref() string                        { return s.ref }
func (s processSession) Renewed() (sent time.Time, ok bool) { return time.Now(), true }
func (s processSession) AliveUntil(ref string) (time.Time, bool) {
	s.all.mu.Lock()
	defer s.all.mu.Unlock()
	if s.all.alive[ref] {
		return time.Now().Add(s.all.lease), true
	}
	return time.Time{}, true
}

// A holder that renews through its session leaves its record as it was,
// so its followers' observation of the record is older than a lease. When
// the lock object is deleted, the session mark goes with it; the followers
// must still judge the holder by its session (which lives) and leave the
// lock to it, rather than take the stale record for expired and create the
// lock while the holder works. The holder writes its record again. Its
// first attempt to create the lock fails here, so that a follower that
// wrongly takes the lock does so first.
func TestDeletedLockOfASessionHolderIsNotTaken(t *testing.T) {
	const lease = 2 * time.Second
	client := kubetest.NewClientset()
	var failCreates atomic.Int32
	client.PrependReactor("create", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		l, ok := action.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease)
		if ok && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "a" && failCreates.Add(-1) >= 0 {
			return true, nil, apierrors.NewServiceUnavailable("injected: the holder's create fails once")
		}
		return false, nil, nil
	})
	sessions := &sharedSessions{lease: lease, alive: map[string]bool{}}
	l := &ledger.Ledger{}
	start := func(identity string) *LeaderElector {
		lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, lockName, client, resourcelock.Config{Identity: identity})
		if err != nil {
			t.Fatal(err)
		}
		le, err := New(Config{
			Name: lockName, Lock: lock,
			LeaseDuration: lease, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 250 * time.Millisecond,
			Callbacks: Callbacks{OnStartedLeading: noErr(l.Wrap(lockName, identity, func(ctx context.Context) {
				<-ctx.Done()
				time.Sleep(300 * time.Millisecond) // a controller shutting down
			}))},
			StopTimeout: time.Second,
			Watch:       true,
			Session:     inSession(lock, 250*time.Millisecond, sessions.of("session-"+identity+"/token")),
		})
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
	getLease := func() *coordinationv1.Lease {
		t.Helper()
		obj, err := client.CoordinationV1().Leases(ns).Get(context.Background(), lockName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}

	a := start("a")
	waitFor(t, "a to lead through its session", func() bool {
		if !a.IsLeader() {
			return false
		}
		mark, ok := a.cfg.Lock.(lockcap.SessionLock).SessionMark()
		return ok && mark.Holder == "a" && mark.Session == "session-a/token"
	})
	b := start("b")
	waitFor(t, "b to follow a through its watch", func() bool { return b.GetLeader() == "a" && b.watch.Healthy() })
	renewed := getLease().Spec.RenewTime.Time
	time.Sleep(lease + 500*time.Millisecond)
	if now := getLease().Spec.RenewTime.Time; !now.Equal(renewed) {
		t.Fatalf("a rewrote its record (renew time %v, then %v); the session should renew it", renewed, now)
	}
	if !a.IsLeader() || b.IsLeader() {
		t.Fatalf("before the deletion a leads %v, b leads %v; want a alone, kept alive by its session", a.IsLeader(), b.IsLeader())
	}

	failCreates.Store(1)
	if err := client.CoordinationV1().Leases(ns).Delete(context.Background(), lockName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("after the lock was deleted, a and b both led for %v", l.TotalOverlap())
	}
	if !a.IsLeader() || b.IsLeader() {
		t.Fatalf("after the deletion a leads %v, b leads %v; want a to keep leading", a.IsLeader(), b.IsLeader())
	}
	if failCreates.Load() >= 0 {
		t.Fatal("a never tried to create its lock again")
	}
	obj := getLease()
	if obj.Spec.HolderIdentity == nil || *obj.Spec.HolderIdentity != "a" {
		t.Fatalf("recreated lock names holder %v, want a", obj.Spec.HolderIdentity)
	}
	if mark := obj.Annotations[lockmeta.SessionAnnotationKey]; mark == "" {
		t.Fatal("recreated lock carries no session mark")
	}
}
