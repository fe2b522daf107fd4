package elector

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// A holder renewed by its session that refused a handover request accepts
// it at its next renew once the candidate is entitled (the holder saw the
// new default after the candidate did). Before, a refused request was not
// pending, so every renew was left to the session and the refusal stood for
// as long as the session lived: the lesser holder kept the election about a
// lease instead of about a retry period.
func TestSessionHolderReconsidersARefusal(t *testing.T) {
	h := newLeaseHarness(t)
	s := &fakeSession{ref: "s/1", sent: t0, current: true, known: true}
	var entitled atomic.Bool
	lock, err := resourcelock.NewLeaseLock(h.client.CoordinationV1(), ns, lockName, resourcelock.Config{Identity: "a", Key: "stable", Cooperative: true})
	if err != nil {
		t.Fatal(err)
	}
	le, err := New(cooperative(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:   Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })},
		StopTimeout: time.Second,
		Watch:       true, Session: inSession(lock, time.Second, s), Clock: h.clock,
	}, 2*time.Second, func(string) bool { return entitled.Load() }))
	if err != nil {
		t.Fatal(err)
	}
	mustAttempt(t, le, false, acquired)
	le.watch.MarkHealthy(true)
	le.loop.lastRenew = t0

	req, _ := json.Marshal(lockmeta.Handover{Holder: "a", Candidate: "c", CandidateKey: "canary", RequestTime: &metav1.Time{Time: t0}})
	h.setHandover(string(req))
	le.watch.Deliver(h.lockObject(), false) // the holder's watch shows the request
	le.watch.ingest()
	h.clock.Step(time.Second)
	s.sent = h.clock.Now()
	if end := le.renewOnce(context.Background()); end != nil {
		t.Fatalf("a refusal ended the term: %+v", end)
	}
	if got := h.handover(); got.Answer != lockmeta.AnswerRefused {
		t.Fatalf("answer = %q, want refused", got.Answer)
	}
	// Still not entitled: the refusal stands and the session renews.
	h.verbs()
	h.clock.Step(time.Second)
	s.sent = h.clock.Now()
	if end := le.renewOnce(context.Background()); end != nil {
		t.Fatalf("renew ended the term: %+v", end)
	}
	assertVerbs(t, h.verbs())

	// The holder now sees the candidate's revision as the default.
	entitled.Store(true)
	h.clock.Step(time.Second)
	s.sent = h.clock.Now()
	end := le.renewOnce(context.Background())
	if end == nil || end.handTo == nil || end.handTo.Candidate != "c" {
		t.Fatalf("the renew after the candidate became entitled = %+v, want a handover to c", end)
	}
	if got := h.handover(); got.Answer != lockmeta.AnswerAccepted {
		t.Fatalf("answer = %q, want accepted", got.Answer)
	}
}

// A session needs its Leases and the lock on one watch: the holder credits
// a heartbeat only once its watch of Leases delivered it back, which says
// nothing about writes to a ConfigMap on another watch. New refuses the
// combination (before, only package election did).
func TestSessionNeedsALeaseLock(t *testing.T) {
	cs := kubetest.NewClientset()
	s := &fakeSession{ref: "s/1"}
	cmLock, _ := resourcelock.NewConfigMapLock(cs.CoreV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	leaseLock, _ := resourcelock.NewLeaseLock(cs.CoordinationV1(), ns, lockName, resourcelock.Config{Identity: "a"})
	for _, c := range []struct {
		name string
		lock resourcelock.Interface
		ok   bool
	}{{"ConfigMap", cmLock, false}, {"Lease", leaseLock, true}} {
		_, err := New(Config{Lock: c.lock, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
			Watch: true, Session: inSession(c.lock, time.Second, s), Callbacks: Callbacks{OnStartedLeading: waitDone}})
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.ok && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Session needs a Lease lock")):
			t.Errorf("%s: err = %v, want a refusal naming the Lease lock", c.name, err)
		}
	}
}
