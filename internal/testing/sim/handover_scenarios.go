package sim

import (
	"sync"
	"time"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// sessionRefusalReconsidered: a holder renewed by its session refuses the
// request of a candidate that saw the new default first, then sees it too.
// It must accept at its next renew, not leave its renewals to the session
// while the refusal stands (about a lease, until the candidate asks again).
func sessionRefusalReconsidered() Scenario {
	s := base("session-refusal-reconsidered", resourcelock.LeasesResourceLock, 12*time.Second)
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "canary", "stable", 200*time.Millisecond)
	a.Session, b.Session = true, true
	a.Work.Drain = 200 * time.Millisecond
	s.Candidates = []CandidateSpec{a, b}
	s.Actions = []Action{sees(3*time.Second, "b", "canary"), sees(3500*time.Millisecond, "a", "canary")}
	t := s.Timing
	// a renews (and reconsiders) within a retry period of seeing the
	// default, stops its work, and names b.
	bound := 3500*time.Millisecond + t.RetryPeriod + a.Work.Drain + t.RetryPeriod
	s.Checks = []func(*World){workedBetween("b", 3*time.Second, bound), workingAtEnd("b")}
	return Scenario{Name: s.Name, Case: "a session holder never reconsidered a refused handover request", Schedule: s}
}

// handoverWriteFails: the holder accepts a request, and its API calls fail
// with 500s from then on for 2.5s, longer than its renew deadline: the
// write naming the candidate fails, every retry too. Once the API answers
// again the holder keeps its promise and names the candidate, instead of
// taking its lock back and leaving the candidate waiting on an acceptance
// for as long as the holder lives.
func handoverWriteFails(kind string) Scenario {
	s := base("handover-write-fails-"+kindName(kind), kind, 14*time.Second)
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "canary", "stable", 200*time.Millisecond)
	a.Work.Drain = 200 * time.Millisecond
	s.Candidates = []CandidateSpec{a, b}
	var once sync.Once
	s.OnRecord = func(w *World, r Record) {
		if r.Writer == "a" && r.Handover.Answer == lockmeta.AnswerAccepted {
			once.Do(func() {
				w.noteFault()
				w.state("a").setMode(errInternal)
			})
		}
	}
	s.Actions = []Action{
		sees(3*time.Second, "b", "canary"), sees(3*time.Second, "a", "canary"),
		at(6*time.Second, "the API answers a again", func(w *World) { w.state("a").setMode(errNone); w.noteFault() }),
	}
	t := s.Timing
	// After the fault: a's next attempt hands over, b starts on its watch.
	bound := 6*time.Second + 2*t.RetryPeriod
	s.Checks = []func(*World){workedBetween("b", 3*time.Second, bound), workingAtEnd("b")}
	return Scenario{Name: s.Name, Case: "one failed handover write stranded the accepted candidate for good", Schedule: s}
}

func kindName(kind string) string {
	if kind == resourcelock.LeasesResourceLock {
		return "lease"
	}
	return "configmap"
}

// workedBetween checks that name's work started in [from, until].
func workedBetween(name string, from, until time.Duration) func(*World) {
	return func(w *World) {
		for _, iv := range w.Work() {
			if iv.Actor == name && iv.Start >= from {
				if iv.Start > until {
					w.Violate("liveness", "%s started working at %v, want by %v", name, iv.Start, until)
				}
				return
			}
		}
		w.Violate("liveness", "%s never worked after %v", name, from)
	}
}
