package elector

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// The holder b accepted c's request and is stopping its work. d, entitled
// too, runs on a wall clock more than a lease behind theirs, so c's request
// reads as stale to it. d used to write its own request over the accepted
// one; b, its work stopped, found the request it had accepted gone,
// released the lock instead of naming c, and took it back at once, and so
// on at every term, past the priority bound (simulation session seeds
// 900017746 and 900066923). The holder judged the request fresh when it
// accepted it: d defers to it whatever its own clock says of its time.
func TestCandidateDefersToAnAcceptedRequestItsClockCallsStale(t *testing.T) {
	h := newHarness(t)
	holder := held("b", "stable", 4)
	h.writeRecord(holder)
	ahead := metav1.NewTime(h.clock.Now().Add(5 * time.Second)) // b's and c's clocks
	raw, err := json.Marshal(lockmeta.Handover{Holder: "b", Candidate: "c", CandidateKey: "canary", RequestTime: &ahead,
		Answer: lockmeta.AnswerAccepted, AnswerTime: &ahead, StopWithinMillis: 2000})
	if err != nil {
		t.Fatal(err)
	}
	h.setHandover(string(raw))
	d := h.start(candidateOpts{identity: "d", key: "canary", steal: true})
	waitFor(t, "d to see b", func() bool { return d.le.GetLeader() == "b" })
	for i := 0; i < 6; i++ { // 1.5s, within the stop b promised
		h.steps(1, 250*time.Millisecond)
		h.renewAs(holder) // b renews while its work stops
		if ho := h.handover(); ho.Candidate != "c" || ho.Answer != lockmeta.AnswerAccepted {
			t.Fatalf("at %v the annotation is %+v: d replaced the request b accepted", h.clock.Since(t0), ho)
		}
	}
	if d.le.IsLeader() {
		t.Fatal("d leads while b stops its work for c")
	}
}
