package sim

import (
	"fmt"
	"time"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Named cases of the faults of faults.go: each shows its fault taking
// effect (a check fails if the fault did nothing) and the election
// surviving it.

// faultScenarios are the named cases of the faults of faults.go.
func faultScenarios() []Scenario {
	return []Scenario{
		wallStepMakesRequestStale(),
		wallStepWithinLease(),
		protocolWriteFails(WriteRequest, false), protocolWriteFails(WriteAnswer, false),
		protocolWriteFails(WriteSuccessor, true),
		sessionWriteFails(WriteHeartbeat), sessionWriteFails(WriteMark),
		coalescedBurstOfRenewals(),
		leavesWhilePreferred(leavePending, true), leavesWhilePreferred(leaveAccepted, true),
		leavesWhilePreferred(leaveTaken, false),
	}
}

// requestWrittenBy returns the first request of candidate in the records,
// and whether there is one.
func requestWrittenBy(w *World, candidate string) (Record, bool) {
	for _, r := range w.Records() {
		if r.Writer == candidate && r.Handover.Candidate == candidate && r.Handover.RequestTime != nil {
			return r, true
		}
	}
	return Record{}, false
}

// checkRequestTime checks that the request of candidate carries its wall
// clock, offset by the world's clock by off (to the second the annotation
// keeps).
func checkRequestTime(candidate string, off time.Duration) func(*World) {
	return func(w *World) {
		r, ok := requestWrittenBy(w, candidate)
		if !ok {
			w.Violate("wall clock", "%s never asked for the lock", candidate)
			return
		}
		got := r.Handover.RequestTime.Sub(epoch.Add(r.At).Truncate(time.Second))
		if d := got - off; d < -time.Second || d > time.Second {
			w.Violate("wall clock", "%s's request at %v carries a time %v off the world's clock, want %v", candidate, r.At, got, off)
		}
	}
}

// wallStepMakesRequestStale: the candidate's wall clock runs ahead of the
// holder's by more than a lease. Its request then reads, by the holder's
// clock, as written more than a lease in the future. The holder, which
// renews its record every RetryPeriod, meets the request after a write of
// its own that did not carry it, so it knows the request for one written
// since that write, by its own clock, and answers it whatever the request
// time says. The check is that the request carries the candidate's wall
// clock, that the holder accepts it (a handover, not a take by force), that
// the candidate leads, and (by the invariants) that nothing overlaps.
// Twice before: the grace started over with every request the holder
// cleared, and the candidate never led while the holder lived; then the
// candidate took the lock by force after the grace, and a chain of such
// takes kept the best candidate waiting past the priority bound (session
// seed 5100000407).
func wallStepMakesRequestStale() Scenario {
	s := base("wall-step-makes-request-stale", resourcelock.LeasesResourceLock, 12*time.Second)
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "canary", "stable", 200*time.Millisecond)
	s.Candidates = []CandidateSpec{a, b}
	step := s.Timing.LeaseDuration + 2*time.Second
	s.Actions = []Action{
		at(time.Second, "b's wall clock steps forward", func(w *World) { w.StepWall("b", step) }),
		sees(3*time.Second, "b", "canary"), sees(3*time.Second, "a", "canary"),
	}
	s.Checks = []func(*World){
		checkRequestTime("b", step), workedAfter("b", 3*time.Second),
		func(w *World) {
			for _, r := range w.Records() {
				if r.Writer == "a" && r.Handover.Candidate == "b" && r.Handover.Answer == lockmeta.AnswerAccepted {
					return
				}
			}
			w.Violate("wall clock", "a never accepted b's request, which its clock reads as %v in the future, though it met it after a write of its own", step)
		},
	}
	return Scenario{Name: s.Name, Case: "wall clocks: a request met after the holder's own write is fresh, whatever its time says", Schedule: s}
}

// wallStepWithinLease: the holder's wall clock steps back by less than a
// lease. The candidate's request then reads, by the holder's clock, as
// written less than a lease in the future: it stands, and the holder
// hands over as it would without the step. The holder's own records come
// back to it by the times it wrote them (the step changes nothing it
// compares).
func wallStepWithinLease() Scenario {
	s := base("wall-step-within-lease", resourcelock.ConfigMapsResourceLock, 12*time.Second)
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "canary", "stable", 200*time.Millisecond)
	a.Work.Drain = 200 * time.Millisecond
	s.Candidates = []CandidateSpec{a, b}
	t := s.Timing
	step := -(t.LeaseDuration - time.Second)
	s.Actions = []Action{
		at(time.Second, "a's wall clock steps back", func(w *World) { w.StepWall("a", step) }),
		sees(3*time.Second, "b", "canary"), sees(3*time.Second, "a", "canary"),
	}
	s.Checks = []func(*World){
		func(w *World) {
			for _, r := range w.Records() {
				if r.Writer == "a" && r.Handover.Candidate == "b" && r.Handover.Answer == lockmeta.AnswerAccepted {
					if got := r.Handover.AnswerTime.Sub(epoch.Add(r.At).Truncate(time.Second)); got < step-time.Second || got > step+time.Second {
						w.Violate("wall clock", "a's answer carries a time %v off the world's clock, want %v", got, step)
					}
					return
				}
			}
			w.Violate("wall clock", "a never accepted b's request")
		},
		workedBetween("b", 3*time.Second, 3*time.Second+t.RetryPeriod+a.Work.Drain+2*t.RetryPeriod),
		workingAtEnd("b"),
	}
	return Scenario{Name: s.Name, Case: "wall clocks: a step back by less than a lease leaves the handover alone", Schedule: s}
}

// checkWriteFaultHits checks that the write fault of name on kind failed
// n writes.
func checkWriteFaultHits(name, kind string, n int) func(*World) {
	return func(w *World) {
		if got := w.state(name).writeFaultHits(kind); got != n {
			w.Violate("write fault", "the fault on %s's %s writes failed %d of them, want %d", name, kind, got, n)
		}
	}
}

// protocolWriteFails: two writes of one kind of the handover protocol fail
// (the request of the candidate, the holder's answer, or the write naming
// the successor), with a 500, or with lost the first executed and its
// answer lost. The candidate still leads, within a bound of the failures.
func protocolWriteFails(kind string, lost bool) Scenario {
	name := fmt.Sprintf("handover-%s-write-fails", kind)
	s := base(name, resourcelock.LeasesResourceLock, 16*time.Second)
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "canary", "stable", 200*time.Millisecond)
	a.Work.Drain = 200 * time.Millisecond
	s.Candidates = []CandidateSpec{a, b}
	who := "a"
	if kind == WriteRequest {
		who = "b"
	}
	n := 2
	if lost {
		n = 1
	}
	t := s.Timing
	s.Actions = []Action{
		at(time.Second, fmt.Sprintf("the next %d %s writes of %s fail", n, kind, who), func(w *World) { w.FailWrites(who, kind, n, lost) }),
		sees(3*time.Second, "b", "canary"), sees(3*time.Second, "a", "canary"),
	}
	// Each failed write costs at most a retry period, or a grace and a
	// forced steal with its fence.
	bound := 3*time.Second + t.HandoverGrace + t.LeaseDuration + 3*t.RetryPeriod
	s.Checks = []func(*World){checkWriteFaultHits(who, kind, n), workedBetween("b", 3*time.Second, bound), workingAtEnd("b")}
	return Scenario{Name: name, Case: fmt.Sprintf("protocol writes: the %s write of the handover fails", kind), Schedule: s}
}

// sessionWriteFails: writes of one kind of the session protocol fail. The
// heartbeat: three in a row, longer than a retry period, while a holds the
// lock; a renews its record itself meanwhile. The mark: a's first write
// naming its session, which is the write that takes the empty lock; a
// takes it at its next attempt, before b starts. Either way the follower
// never takes the lock.
func sessionWriteFails(kind string) Scenario {
	name := fmt.Sprintf("session-%s-write-fails", kind)
	s := base(name, resourcelock.LeasesResourceLock, 12*time.Second)
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "stable", "stable", 300*time.Millisecond)
	a.Session, b.Session = true, true
	n, from := 3, 2*time.Second
	if kind == WriteMark {
		n, from = 1, 0
		b.StartAt = 2 * time.Second
	}
	s.Candidates = []CandidateSpec{a, b}
	s.Actions = []Action{at(from, fmt.Sprintf("the next %d %s writes of a fail", n, kind), func(w *World) { w.FailWrites("a", kind, n, false) })}
	s.Checks = []func(*World){
		checkWriteFaultHits("a", kind, n),
		workingAtEnd("a"),
		func(w *World) {
			for _, r := range w.Records() {
				if r.Holder == "b" {
					w.Violate("session", "b took the lock at %v from a holder whose %s writes failed", r.At, kind)
					return
				}
			}
		},
	}
	return Scenario{Name: name, Case: fmt.Sprintf("protocol writes: the %s write of a session fails", kind), Schedule: s}
}

// coalescedBurstOfRenewals: the follower's watch lags for three renewals
// of the holder and then delivers them in one burst, of which it reads
// only the newest. It times the holder's lease from that one and never
// takes the lock from the live holder.
func coalescedBurstOfRenewals() Scenario {
	s := base("coalesced-burst-of-renewals", resourcelock.LeasesResourceLock, 12*time.Second)
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "stable", "stable", 200*time.Millisecond)
	s.Candidates = []CandidateSpec{a, b}
	s.Actions = []Action{at(2*time.Second, "b's watch lags, then bursts", func(w *World) {
		w.CoalescedBurst("b", 3*time.Second, 3500*time.Millisecond)
	})}
	s.Checks = []func(*World){
		func(w *World) {
			if n := w.state("b").coalescedEvents(); n < 2 {
				w.Violate("coalesced burst", "b's burst left out %d changes, want at least 2", n)
			}
		},
		workingAtEnd("a"),
		func(w *World) {
			for _, r := range w.Records() {
				if r.Holder == "b" {
					w.Violate("coalesced burst", "b took the lock at %v from a live holder", r.At)
					return
				}
			}
		},
	}
	return Scenario{Name: s.Name, Case: "watches: a burst after a lag delivers only the newest of several renewals", Schedule: s}
}

// leavesWhilePreferred: the candidate, which outranks the holder, crashes
// as soon as its request is pending, or accepted, or as soon as it has
// taken the lock. A holder that accepted has stopped its work and names
// the candidate, which is gone: the election is without a leader until
// that record's lease runs out, and the old holder takes the lock again
// after it; so it does when the candidate took the lock itself. A holder
// that has not answered yet may do either. Either way the old holder works
// at the end.
func leavesWhilePreferred(when string, cooperative bool) Scenario {
	name := "candidate-leaves-when-" + when
	s := base(name, resourcelock.LeasesResourceLock, 14*time.Second)
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "canary", "stable", 200*time.Millisecond)
	a.Work.Drain = 200 * time.Millisecond
	b.Cooperative = cooperative
	s.Candidates = []CandidateSpec{a, b}
	s.Actions = []Action{
		at(time.Second, "b crashes once "+leaveWhen("b", when), func(w *World) { w.LeaveWhen("b", when, true, 0, "") }),
		sees(3*time.Second, "b", "canary"), sees(3*time.Second, "a", "canary"),
	}
	t := s.Timing
	s.Checks = []func(*World){func(w *World) {
		crashedAt, ok := w.Left("b")
		if !ok {
			w.Violate("leave", "b never left: %s never happened", leaveWhen("b", when))
			return
		}
		if when != leavePending {
			workedBetween("a", crashedAt, crashedAt+t.LeaseDuration+t.RetryPeriod)(w)
		}
	}, workingAtEnd("a")}
	return Scenario{Name: name, Case: "candidates that leave while they are preferred: " + leaveWhen("b", when), Schedule: s}
}
