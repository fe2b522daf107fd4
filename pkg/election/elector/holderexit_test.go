package elector

import (
	"testing"
	"time"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// fakeExit answers HolderExit from a field and records what it was asked.
type fakeExit struct {
	exited bool
	asked  []string
}

func (f *fakeExit) Exited(rec resourcelock.Record) bool {
	f.asked = append(f.asked, rec.HolderIdentity)
	return f.exited
}

// A follower takes an unexpired lock only once the hook proves the
// holder's process gone, through the usual write over the version it
// read, and starts without a fence: the holder's work cannot run.
func TestHolderExitEndsTheLeaseAtOnce(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "", 30))
	le := h.elector("a", "", nil, nil)
	exit := &fakeExit{}
	le.cfg.HolderExit = exit
	h.verbs()

	mustAttempt(t, le, false, heldByOther)
	assertVerbs(t, h.verbs(), "get configmaps")
	if len(exit.asked) == 0 || exit.asked[0] != "b" {
		t.Fatalf("the hook was asked about %q, want the holder b", exit.asked)
	}

	h.clock.Step(time.Second)
	exit.exited = true
	mustAttempt(t, le, false, acquired)
	assertVerbs(t, h.verbs(), "get configmaps", "update configmaps")
	if rec := h.record(); rec.HolderIdentity != "a" || rec.LeaderTransitions != 3 {
		t.Fatalf("record after the takeover = %+v", rec)
	}
	if !le.fence.startAt.IsZero() {
		t.Errorf("a takeover on proof set a fence at %v", le.fence.startAt)
	}
}

// The hook is never asked about a free lock or this candidate's own
// record, and a fence set earlier for another holder outlives a takeover
// on proof.
func TestHolderExitKeepsAnEarlierFence(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "", 30))
	le := h.elector("a", "", nil, nil)
	exit := &fakeExit{exited: true}
	le.cfg.HolderExit = exit
	fence := t0.Add(20 * time.Second) // of a steal from another holder, earlier
	le.fence.startAt = fence
	mustAttempt(t, le, false, acquired)
	if !le.fence.startAt.Equal(fence) {
		t.Errorf("fence = %v, want the earlier one %v kept", le.fence.startAt, fence)
	}
	exit.asked = nil
	mustAttempt(t, le, true, acquired) // renewing its own record
	if len(exit.asked) != 0 {
		t.Errorf("the hook was asked about this candidate's own record: %q", exit.asked)
	}
}

// Without proof the lease binds to the last microsecond, and expires as
// before.
func TestHolderExitWithoutProofWaitsTheLease(t *testing.T) {
	h := newHarness(t)
	h.writeRecord(held("b", "", 4))
	le := h.elector("a", "", nil, nil)
	le.cfg.HolderExit = &fakeExit{}
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(4 * time.Second)
	mustAttempt(t, le, false, heldByOther)
	h.clock.Step(time.Millisecond)
	mustAttempt(t, le, false, acquired)
}
