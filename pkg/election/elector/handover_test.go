package elector

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// setHandover writes the handover annotation as another process would.
func (h *harness) setHandover(raw string) {
	h.t.Helper()
	obj := h.lockObject()
	annotationsOf(obj)[lockmeta.HandoverAnnotationKey] = raw
	h.updateLock(obj)
}

func TestStoppedCandidateWithdrawsItsRequest(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("ghost", "canary", 30))
	h.setHandover(`{"holder":"ghost"}`)
	c := h.start(candidateOpts{identity: "c", key: "stable", steal: true})
	waitFor(t, "c's request", func() bool { return h.handover().Candidate == "c" })
	c.stop()
	<-c.done
	if ho := h.handover(); ho.Candidate != "" || ho.Holder != "ghost" {
		t.Fatalf("request left behind by a stopped candidate: %+v", ho)
	}
}

func TestCandidateStoppedAfterBeingHandedTheLockReleasesIt(t *testing.T) {
	h := newHarness(t)
	var failUpdates atomic.Bool
	failUpdates.Store(true)
	h.client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failUpdates.Load() {
			return true, nil, apierrors.NewInternalError(context.DeadlineExceeded)
		}
		return false, nil, nil
	})
	// The holder has handed the lock to c, but c cannot confirm yet.
	failUpdates.Store(false)
	h.writeRecord(held("c", "stable", 30))
	h.setHandover(`{"holder":"c"}`)
	failUpdates.Store(true)
	c := h.start(candidateOpts{identity: "c", key: "stable"})
	waitFor(t, "c to see itself named", func() bool { return c.le.GetLeader() == "c" && c.le.LastError() != nil })
	if c.le.IsLeader() {
		t.Fatal("c leads although it could not confirm")
	}
	failUpdates.Store(false)
	c.stop()
	<-c.done
	if rec := h.record(); rec.HolderIdentity != "" || rec.LeaseDurationSeconds != 1 {
		t.Fatalf("a candidate named by a handover left without releasing: %+v", rec)
	}
}

func TestRequestMadeDuringHandoverIsAnsweredOnceLeading(t *testing.T) {
	h := newHarness(t)
	// The previous holder handed the lock to c1; meanwhile c2, which
	// outranks c1, asked c1 to hand over.
	h.writeRecord(held("c1", "^stable", 30))
	h.setHandover(`{"holder":"c1","candidate":"c2","candidateKey":"stable","requestTime":"2026-01-02T03:04:05Z"}`)
	c1 := h.start(candidateOpts{identity: "c1", key: "^stable", accept: true})
	waitFor(t, "c1 to hand the lock to c2", func() bool { return h.record().HolderIdentity == "c2" })
	rec := h.record()
	if rec.HolderKey != "stable" || rec.LeaderTransitions != 3 {
		t.Fatalf("record after the second handover = %+v", rec)
	}
	if c1.le.IsLeader() {
		t.Fatal("c1 still leads")
	}
	// No clock step was needed: the request was answered at once, not at
	// the next renew.
}

func TestCandidateReplacesRequestOfOneItOutranks(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("ghost", "canary", 30))
	h.setHandover(`{"holder":"ghost","candidate":"remote-1","candidateKey":"^stable"}`)
	h.start(candidateOpts{identity: "local-1", key: "stable", steal: true})
	waitFor(t, "local-1's request to replace remote-1's", func() bool {
		ho := h.handover()
		return ho.Candidate == "local-1" && ho.CandidateKey == "stable" && ho.Holder == "ghost"
	})
	time.Sleep(20 * time.Millisecond)
	if ho := h.handover(); ho.Candidate != "local-1" {
		t.Fatalf("request flapped: %+v", ho)
	}
}

// TestCandidateAsksAgainAfterAConflictTheWatchDoesNotExplain: a watching
// candidate decides from the object its watch delivered, and a write that
// conflicts means someone wrote a version the watch is about to deliver.
// When none comes (the API server answered 409 with no write behind it),
// the candidate asks again a RetryPeriod later. Before, it waited for the
// holder's lease to run out: in simulation session seed 16200042637 the
// best candidate's request met such a conflict and it asked only 4 s
// later, so the election kept an outranked holder past the priority bound.
func TestCandidateAsksAgainAfterAConflictTheWatchDoesNotExplain(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("h", "canary", 30))
	h.setHandover(`{"holder":"h"}`)
	conflicts := h.conflictOnce()
	c := h.start(candidateOpts{identity: "c", key: "stable", steal: true})
	waitFor(t, "c's first request to conflict", func() bool { return conflicts.Load() == 1 })
	asked := func() bool { return h.handover().Candidate == "c" }
	for i := 0; i < 12 && !asked(); i++ { // up to 3 s; RetryPeriod is 1 s, the lease 30 s
		h.steps(1, 250*time.Millisecond)
	}
	if !asked() {
		t.Fatalf("c did not ask again within 3 s of a conflict the watch did not explain: %+v", h.handover())
	}
	c.stop()
	<-c.done
}

// conflictOnce makes the next update of the lock's ConfigMap fail with a
// conflict that no write stands behind, as an API server may answer; the
// count tells whether it has happened.
func (h *harness) conflictOnce() *atomic.Int32 {
	var conflicts atomic.Int32
	h.client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts.CompareAndSwap(0, 1) {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, lockName, errors.New("injected"))
		}
		return false, nil, nil
	})
	return &conflicts
}
