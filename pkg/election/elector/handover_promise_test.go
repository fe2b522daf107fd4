package elector

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// cooperativeElector is a polling, cooperative holder that accepts every
// request while accept is set.
func (h *harness) cooperativeElector(identity string, accept *atomic.Bool) *LeaderElector {
	h.t.Helper()
	lock, err := resourcelock.NewConfigMapLock(h.client.CoreV1(), ns, lockName, resourcelock.Config{Identity: identity, Key: "stable", Cooperative: true})
	if err != nil {
		h.t.Fatal(err)
	}
	le, err := New(cooperative(Config{
		Name: lockName, Lock: lock,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
		Callbacks:   Callbacks{OnStartedLeading: noErr(func(ctx context.Context) { <-ctx.Done() })},
		StopTimeout: time.Second,
		Clock:       h.clock,
	}, 2*time.Second, func(string) bool { return accept.Load() }))
	if err != nil {
		h.t.Fatal(err)
	}
	return le
}

// acceptedRequest writes c's request, accepted by holder, as the holder's
// answer left it.
func (h *harness) acceptedRequest(holder string) {
	h.t.Helper()
	now := metav1.NewTime(h.clock.Now())
	raw, _ := json.Marshal(lockmeta.Handover{Holder: holder, Candidate: "c", CandidateKey: "canary", RequestTime: &now,
		Answer: lockmeta.AnswerAccepted, AnswerTime: &now, StopWithinMillis: 2000})
	h.setHandover(string(raw))
}

// failUpdates makes the next n updates of the lock fail with a 500.
func (h *harness) failUpdates(n int32) {
	left := n
	h.client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if atomic.AddInt32(&left, -1) >= 0 {
			return true, nil, apierrors.NewInternalError(context.DeadlineExceeded)
		}
		return false, nil, nil
	})
}

// The holder's one write naming the candidate it accepted failed with a
// 500: it is tried again at once. Before, the failure was only logged and
// the record kept naming the holder.
func TestHandoverWriteIsRetriedAfterAFailure(t *testing.T) {
	h := newHarness(t)
	var accept atomic.Bool
	accept.Store(true)
	le := h.cooperativeElector("a", &accept)
	mustAttempt(t, le, false, acquired)
	h.acceptedRequest("a")
	mustAttempt(t, le, true, handOff) // the holder reads the request and accepts it
	h.failUpdates(1)
	le.handOver(*le.loop.handTo, false)
	if rec := h.record(); rec.HolderIdentity != "c" {
		t.Fatalf("record after a failed handover write = %+v, want c as holder", rec)
	}
}

// Every write at the end of the term failed, so the record still names the
// holder and the request still says accepted. When the holder contends
// again it keeps its promise and names the candidate, instead of taking the
// lock back and leaving the candidate waiting on an acceptance that no
// one answers again (before: the candidate never led while both lived).
func TestHolderKeepsItsPromiseAfterAFailedHandover(t *testing.T) {
	h := newHarness(t)
	var accept atomic.Bool
	accept.Store(true)
	le := h.cooperativeElector("a", &accept)
	mustAttempt(t, le, false, acquired)
	h.acceptedRequest("a")
	h.clock.Step(500 * time.Millisecond)
	mustAttempt(t, le, false, heldByOther)
	if rec := h.record(); rec.HolderIdentity != "c" || rec.HolderKey != "canary" {
		t.Fatalf("record = %+v, want the lock handed to c", rec)
	}
}

// A holder that leads again with an accepted request it did not honour
// answers it again: refused when it no longer agrees, so the candidate is
// not left waiting on an acceptance.
func TestLeaderAnswersABrokenPromiseAgain(t *testing.T) {
	h := newHarness(t)
	var accept atomic.Bool
	le := h.cooperativeElector("a", &accept)
	mustAttempt(t, le, false, acquired)
	h.acceptedRequest("a")
	h.clock.Step(500 * time.Millisecond)
	mustAttempt(t, le, false, acquired) // it no longer agrees: it keeps the lock
	h.clock.Step(500 * time.Millisecond)
	mustAttempt(t, le, true, acquired)
	if got := h.handover(); got.Answer != lockmeta.AnswerRefused {
		t.Fatalf("answer after the holder changed its mind = %q (%+v), want refused", got.Answer, got)
	}
}

// A candidate whose request was accepted waits for the holder to name it;
// if the holder lets the time it promised, and a RetryPeriod more, pass
// while it goes on renewing (it crashed after accepting and came back
// under its identity), the candidate asks again. Before, it waited on the
// old acceptance for as long as the holder renewed (simulation session
// seed 3683, checked by the priority invariant).
func TestCandidateAsksAgainWhenAnAcceptedRequestIsNotHonoured(t *testing.T) {
	h := newHarness(t)
	holder := held("b", "canary", 4)
	h.writeRecord(holder)
	h.setHandover(`{"holder":"b"}`)
	h.start(candidateOpts{identity: "c", key: "stable", steal: true})
	waitFor(t, "c's request", func() bool { return h.handover().Candidate == "c" })
	first := h.handover()
	// b accepts, promising to stop within 500ms, and then only renews.
	now := metav1.NewTime(h.clock.Now())
	first.Answer, first.AnswerTime, first.StopWithinMillis = lockmeta.AnswerAccepted, &now, 500
	raw, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	h.setHandover(string(raw))
	// c takes in the answer from its watch between the steps below (each
	// lets goroutines run); its handover state belongs to its loop and is
	// not read from here.
	for i := 0; i < 5; i++ { // to t0+1.25s: before the promise is broken
		h.steps(1, 250*time.Millisecond)
		h.renewAs(holder)
		if ho := h.handover(); ho.Candidate != "c" || ho.Answer != lockmeta.AnswerAccepted {
			t.Fatalf("c asked again at %v, while the promise stood: %+v", h.clock.Since(t0), ho)
		}
	}
	h.steps(2, 250*time.Millisecond) // t0+1.75s: 500ms + RetryPeriod after the answer
	h.renewAs(holder)
	waitFor(t, "c to ask again", func() bool {
		ho := h.handover()
		return ho.Candidate == "c" && ho.Answer == "" && !ho.RequestTime.Equal(first.RequestTime)
	})
}

// A holder whose wall clock is a lease or more apart from the candidate's,
// and that has not written the lock for a lease (with sessions, for most of
// its term), takes every request for stale and clears it without an answer
// (package internal/protocol/handover, TestRequestAgeIsBoundedByTheHoldersOwnWrite). The
// candidate asked again each time, and each request started the grace
// period anew, so it never led while the holder lived (simulation scenario
// wall-step-makes-request-stale). The grace now counts from its first
// unanswered request, and then it takes the lock by force, fenced.
func TestCandidateTakesTheLockWhenItsRequestsAreClearedUnanswered(t *testing.T) {
	h := newHarness(t)
	holder := held("b", "canary", 4)
	h.writeRecord(holder)
	h.setHandover(`{"holder":"b"}`)
	c := h.start(candidateOpts{identity: "c", key: "stable", steal: true, grace: 2500 * time.Millisecond})
	waitFor(t, "c's first request", func() bool { return h.handover().Candidate == "c" })
	firstAsk, asks := h.clock.Now(), 0
	for h.clock.Since(firstAsk) < 5*time.Second && h.holderOrNone() != "c" {
		if h.handover().Candidate == "c" {
			asks++
			h.setHandover(`{"holder":"b"}`) // b clears it without an answer, as stale
		}
		h.steps(1, 250*time.Millisecond)
		if h.holderOrNone() == "c" && h.clock.Since(firstAsk) < 2500*time.Millisecond {
			t.Fatalf("c took the lock %v after its first request, within the grace", h.clock.Since(firstAsk))
		}
		if h.holderOrNone() != "c" {
			h.renewAs(holder)
		}
	}
	if asks < 2 {
		t.Fatalf("c asked %d time(s); the test needs it to ask again after a cleared request", asks)
	}
	waitFor(t, "c to take the lock by force", func() bool { return h.holderOrNone() == "c" && c.le.IsLeader() })
}
