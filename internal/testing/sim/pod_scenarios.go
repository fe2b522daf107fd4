package sim

import (
	"slices"
	"time"

	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Scenarios of Pod-aware failover (pods.go). Each runs a holder and a
// follower with PodFailover in Pods of their own, at a lease of 10s so that
// a takeover at the kubelet's report (1s after the fact) cannot be taken
// for one at the lease's end. Each but the restart is also run with a
// naive judge (Schedule.NaiveHolderExit, TestPodScenariosNeedTheProofRules),
// or, where the protection is the feature itself, without the failover,
// and must then fail.
func podScenarios() []Scenario {
	return []Scenario{
		podExitReportedTakeover(true),
		podForceDeletedNoEarlyTakeover(),
		podPartitionNoEarlyTakeover(),
		podRestartedUnderSameName(),
	}
}

// podTiming is a ttl of 10s.
func podTiming() Timing {
	return Timing{LeaseDuration: 10 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: 2 * time.Second,
		StopTimeout: time.Second, HandoverGrace: 5 * time.Second}
}

// podPair is holder "a" (leading from the start) and follower "b", both of
// revision stable, local, watching, in Pods pod-a and pod-b.
func podPair(name string, d time.Duration) Schedule {
	s := base(name, resourcelock.LeasesResourceLock, d)
	s.Timing = podTiming()
	s.KubeletDelay = time.Second
	a, b := meshd("a", "stable", "stable", 0), meshd("b", "stable", "stable", 300*time.Millisecond)
	a.Pod, b.Pod = "pod-a", "pod-b"
	a.PodFailover, b.PodFailover = true, true
	s.Candidates = []CandidateSpec{a, b}
	return s
}

// workStartedWithin checks that the first of names to start work at or
// after from started by to.
func workStartedWithin(from, to time.Duration, names ...string) func(*World) {
	return func(w *World) {
		for _, iv := range w.Work() {
			if slices.Contains(names, iv.Actor) && iv.Start >= from {
				if iv.Start > to {
					w.Violate("pod failover", "%s started work at %v, after %v", iv.Actor, iv.Start, to)
				}
				return
			}
		}
		w.Violate("pod failover", "none of %v started work after %v", names, from)
	}
}

// neverWorked checks that name never worked.
func neverWorked(name string) func(*World) {
	return func(w *World) {
		for _, iv := range w.Work() {
			if iv.Actor == name {
				w.Violate("pod failover", "%s worked from %v while the holder worked on", name, iv.Start)
				return
			}
		}
	}
}

// The holder's process is killed at 12s; the kubelet reports its container
// terminated at 13s; the follower takes over then, at least 7s before the
// lease it last saw renewed would end. Without the failover it waits for
// the lease.
func podExitReportedTakeover(failover bool) Scenario {
	s := podPair("pod-exit-reported-takeover", 26*time.Second)
	s.Candidates[1].PodFailover = failover
	s.Actions = []Action{at(12*time.Second, "kill a", func(w *World) { w.mustFind("a").crash() })}
	s.Checks = []func(*World){workStartedWithin(12*time.Second, 13200*time.Millisecond, "b")}
	return Scenario{Name: s.Name, Case: "a kubelet-reported exit of the holder's run: the follower takes over at the report", Schedule: s}
}

// The holder's Pod is deleted by force at 3s while its process runs on; a
// Pod of the same name comes back with a new UID and a terminated
// container. The holder renews throughout: the follower never takes over.
func podForceDeletedNoEarlyTakeover() Scenario {
	s := podPair("pod-force-deleted-no-early-takeover", 20*time.Second)
	s.Actions = []Action{at(3*time.Second, "delete pod-a by force", func(w *World) { w.ForceDeletePod("a", 500*time.Millisecond) })}
	s.Checks = []func(*World){neverWorked("b")}
	return Scenario{Name: s.Name, Case: "a forced delete of the holder's Pod is no proof of its exit", Schedule: s}
}

// The holder's node is partitioned from 3s to 15s: its Pod's status is
// frozen (the node controller marks it not ready) while its process runs
// on and renews. The follower never takes over.
func podPartitionNoEarlyTakeover() Scenario {
	s := podPair("pod-partition-no-early-takeover", 20*time.Second)
	s.Actions = []Action{at(3*time.Second, "partition the node of a", func(w *World) { w.PartitionNode("a", 12*time.Second) })}
	s.Checks = []func(*World){neverWorked("b")}
	return Scenario{Name: s.Name, Case: "a partitioned node, its Pod's status frozen, is no proof of the holder's exit", Schedule: s}
}

// The holder's container is killed at 12s and restarted in the same Pod
// at 12.5s under a new identity (restart count 1). The kubelet reports the
// exit at 13s (and the restart at 13.5s): the follower or the restarted
// process, which follows the Pod too, takes the lock on it at once; the
// two never run together (the overlap invariant).
func podRestartedUnderSameName() Scenario {
	s := podPair("pod-restarted-under-same-name", 26*time.Second)
	s.Actions = []Action{
		at(12*time.Second, "kill a; its container restarts", func(w *World) {
			w.mustFind("a").crash()
			w.After(500*time.Millisecond, "restart a as a-r1 in pod-a", func(w *World) { w.Restart("a", "a-r1") })
		}),
	}
	s.Checks = []func(*World){workStartedWithin(12*time.Second, 13200*time.Millisecond, "b", "a-r1")}
	return Scenario{Name: s.Name, Case: "a container restarted under the same Pod name: the successor and the restarted process never run together", Schedule: s}
}
