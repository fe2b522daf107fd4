package elector

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// request writes a pending request of candidate to holder, unseen by the
// holder's elector.
func (h *harness) request(holder, candidate string) {
	h.t.Helper()
	now := metav1.NewTime(h.clock.Now())
	raw, _ := json.Marshal(lockmeta.Handover{Holder: holder, Candidate: candidate, CandidateKey: "canary", RequestTime: &now})
	h.setHandover(string(raw))
}

// A holder whose answer to a request conflicts (another candidate asked
// since, and its watch, broken or lagging, has not delivered that request)
// reads the lock and renews, and answers the request the lock carries now
// at its next renew. Before, the conflict failed the renew, and every later
// renew answered on the same stale object until the renew deadline passed
// (simulation seed 400269823: four failed renews, the term lost, the
// entitled candidate kept waiting past the priority bound).
func TestConflictingAnswerReadsTheLockAndRenews(t *testing.T) {
	h := newHarness(t)
	var accept atomic.Bool
	le := h.cooperativeElector("a", &accept)
	mustAttempt(t, le, false, acquired)

	h.request("a", "b")
	mustAttempt(t, le, true, acquired) // it reads b's request and refuses it
	if got := h.handover(); got.Candidate != "b" || got.Answer != lockmeta.AnswerRefused {
		t.Fatalf("handover annotation %+v, want b's request refused", got)
	}
	h.request("a", "c") // c asks over it; the holder does not see that
	accept.Store(true)  // and now agrees: it reconsiders b's request, on its stale object

	h.verbs() // forget the calls so far
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		out, err := le.attempt(ctx, true)
		switch {
		case out == handOff:
			if le.loop.handTo == nil || le.loop.handTo.Candidate != "c" {
				t.Fatalf("accepted %+v, want c's request, the one the lock carries", le.loop.handTo)
			}
			if verbs := h.verbs(); !slices.Contains(verbs, "get configmaps") {
				t.Fatalf("API calls %q: the holder never read the lock after its answer conflicted", verbs)
			}
			return
		case out != acquired:
			t.Fatalf("renew %d after a conflicting answer = %v (%v), want it to read the lock and renew", i+1, out, err)
		}
	}
	t.Fatal("c's request, the one the lock carries, was not accepted within two renews")
}
