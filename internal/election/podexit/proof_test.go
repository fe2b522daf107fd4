package podexit

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

var (
	// The holder's run: its container started at t0, its process read
	// its clock at t0 + 300ms.
	t0      = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	started = t0
	alive   = t0.Add(300 * time.Millisecond)
)

func holderMark() lockmeta.HolderPod {
	return lockmeta.HolderPod{
		Holder: "meshd-0_ab", Namespace: "istio-system", Pod: "meshd-0", UID: "uid-1", Container: "meshd",
		RestartCount: 2, StartedAt: metav1.NewTime(started), ProcessStart: metav1.NewMicroTime(alive),
	}
}

// runningPod is the holder's Pod as the kubelet reports it while the
// published run (restart count 2) runs.
func runningPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "meshd-0", UID: "uid-1"},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "sidecar", RestartCount: 9, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					FinishedAt: metav1.NewTime(t0.Add(time.Hour))}}},
				{Name: "meshd", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{
					StartedAt: metav1.NewTime(started)}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						StartedAt: metav1.NewTime(t0.Add(-time.Hour)), FinishedAt: metav1.NewTime(t0.Add(-time.Second))}}},
			},
		},
	}
}

func meshdStatus(p *corev1.Pod) *corev1.ContainerStatus { return &p.Status.ContainerStatuses[1] }

func terminated(at time.Time) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(at)}
}

// proofCases are every signal of both lists: what proves that the holder's
// process exited and what does not.
func proofCases() []struct {
	name  string
	pod   func() *corev1.Pod
	proof bool
} {
	return []struct {
		name  string
		pod   func() *corev1.Pod
		proof bool
	}{
		// Proof.
		{"container terminated", func() *corev1.Pod {
			p := runningPod()
			meshdStatus(p).State = corev1.ContainerState{Terminated: terminated(t0.Add(10 * time.Second))}
			return p
		}, true},
		{"container restarted, running again", func() *corev1.Pod {
			p := runningPod()
			cs := meshdStatus(p)
			cs.RestartCount = 3
			cs.LastTerminationState = corev1.ContainerState{Terminated: terminated(t0.Add(10 * time.Second))}
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(11 * time.Second))}}
			return p
		}, true},
		{"container restarted, waiting in back-off", func() *corev1.Pod {
			p := runningPod()
			cs := meshdStatus(p)
			cs.RestartCount = 3
			cs.LastTerminationState = corev1.ContainerState{Terminated: terminated(t0.Add(10 * time.Second))}
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			return p
		}, true},
		{"restarted twice", func() *corev1.Pod {
			p := runningPod()
			cs := meshdStatus(p)
			cs.RestartCount = 4
			cs.LastTerminationState = corev1.ContainerState{Terminated: terminated(t0.Add(20 * time.Second))}
			return p
		}, true},
		{"pod failed, container terminated", func() *corev1.Pod {
			p := runningPod()
			p.Status.Phase = corev1.PodFailed
			meshdStatus(p).State = corev1.ContainerState{Terminated: terminated(t0.Add(10 * time.Second))}
			return p
		}, true},
		{"pod succeeded, container completed", func() *corev1.Pod {
			p := runningPod()
			p.Status.Phase = corev1.PodSucceeded
			meshdStatus(p).State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: metav1.NewTime(t0.Add(5 * time.Second))}}
			return p
		}, true},
		{"deletion timestamp, container terminated", func() *corev1.Pod {
			p := runningPod()
			now := metav1.NewTime(t0.Add(5 * time.Second))
			p.DeletionTimestamp = &now
			meshdStatus(p).State = corev1.ContainerState{Terminated: terminated(t0.Add(10 * time.Second))}
			return p
		}, true},

		// Not proof.
		{"running", runningPod, false},
		{"pod missing or deleted", func() *corev1.Pod { return nil }, false},
		{"same name, another UID (a forced delete and a new Pod)", func() *corev1.Pod {
			p := runningPod()
			p.UID = types.UID("uid-2")
			meshdStatus(p).State = corev1.ContainerState{Terminated: terminated(t0.Add(10 * time.Second))}
			return p
		}, false},
		{"deletion timestamp", func() *corev1.Pod {
			p := runningPod()
			now := metav1.NewTime(t0.Add(5 * time.Second))
			p.DeletionTimestamp = &now
			return p
		}, false},
		{"evicted: phase Failed while the container is reported running", func() *corev1.Pod {
			p := runningPod()
			p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
			return p
		}, false},
		{"node NotReady: status unknown", func() *corev1.Pod {
			p := runningPod()
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "NodeNotReady"}}
			return p
		}, false},
		{"node unreachable: phase Unknown", func() *corev1.Pod {
			p := runningPod()
			p.Status.Phase = corev1.PodUnknown
			return p
		}, false},
		{"stale: the end of an earlier run (before the holder was alive)", func() *corev1.Pod {
			p := runningPod()
			meshdStatus(p).State = corev1.ContainerState{Terminated: terminated(t0.Add(-time.Second))}
			meshdStatus(p).RestartCount = 1
			return p
		}, false},
		{"stale: an earlier run ended in the second the holder's process started", func() *corev1.Pod {
			p := runningPod()
			meshdStatus(p).State = corev1.ContainerState{Terminated: terminated(t0)}
			return p
		}, false},
		{"clock stepped back: a late end of an older run", func() *corev1.Pod {
			p := runningPod()
			meshdStatus(p).RestartCount = 1
			meshdStatus(p).State = corev1.ContainerState{Terminated: terminated(t0.Add(time.Minute))}
			return p
		}, false},
		{"restart count above, but the previous run ended before the holder was alive", func() *corev1.Pod {
			p := runningPod()
			meshdStatus(p).RestartCount = 3
			return p
		}, false},
		{"terminated without a finish time", func() *corev1.Pod {
			p := runningPod()
			meshdStatus(p).State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "ContainerStatusUnknown", ExitCode: 137}}
			return p
		}, false},
		{"no status of the holder's container", func() *corev1.Pod {
			p := runningPod()
			p.Status.ContainerStatuses = p.Status.ContainerStatuses[:1]
			return p
		}, false},
		{"another container of the Pod terminated", func() *corev1.Pod {
			return runningPod() // the sidecar's end is part of runningPod
		}, false},
		{"pod of another name", func() *corev1.Pod {
			p := runningPod()
			p.Name = "meshd-1"
			meshdStatus(p).State = corev1.ContainerState{Terminated: terminated(t0.Add(10 * time.Second))}
			return p
		}, false},
	}
}

func TestProves(t *testing.T) {
	for _, c := range proofCases() {
		t.Run(c.name, func(t *testing.T) {
			got, why := Proves(c.pod(), holderMark())
			if got != c.proof {
				t.Fatalf("Proves = %v (%s), want %v", got, why, c.proof)
			}
			if why == "" {
				t.Error("no reason given")
			}
		})
	}
}

// A mark that is incomplete proves nothing, whatever the Pod says.
func TestProvesNothingWithoutACompleteMark(t *testing.T) {
	p := runningPod()
	meshdStatus(p).State = corev1.ContainerState{Terminated: terminated(t0.Add(10 * time.Second))}
	m := holderMark()
	m.ProcessStart = metav1.MicroTime{}
	if got, why := Proves(p, m); got {
		t.Fatalf("an incomplete mark proved an exit: %s", why)
	}
}

func TestOwnRun(t *testing.T) {
	id := Identity{Namespace: "istio-system", Pod: "meshd-0", UID: "uid-1", Container: "meshd", ProcessStart: alive}
	for _, c := range []struct {
		name  string
		pod   func() *corev1.Pod
		id    func(Identity) Identity
		ok    bool
		count int32
	}{
		{"this run", runningPod, nil, true, 2},
		{"started in the same second, process read its clock 0.9s later",
			runningPod, func(i Identity) Identity { i.ProcessStart = t0.Add(900 * time.Millisecond); return i }, true, 2},
		{"not yet known", func() *corev1.Pod { return nil }, nil, false, 0},
		{"another UID", func() *corev1.Pod { p := runningPod(); p.UID = "uid-2"; return p }, nil, false, 0},
		{"being deleted", func() *corev1.Pod {
			p := runningPod()
			now := metav1.NewTime(t0)
			p.DeletionTimestamp = &now
			return p
		}, nil, false, 0},
		{"stale: the previous run still reported running", func() *corev1.Pod {
			p := runningPod()
			meshdStatus(p).State.Running.StartedAt = metav1.NewTime(t0.Add(-2 * time.Second))
			meshdStatus(p).RestartCount = 1
			return p
		}, nil, false, 0},
		{"stale: the previous run reported terminated, not restarted yet", func() *corev1.Pod {
			p := runningPod()
			meshdStatus(p).State = corev1.ContainerState{Terminated: terminated(t0)}
			return p
		}, nil, false, 0},
		{"a start after the process's own reading", func() *corev1.Pod {
			p := runningPod()
			meshdStatus(p).State.Running.StartedAt = metav1.NewTime(t0.Add(2 * time.Second))
			return p
		}, nil, false, 0},
		{"process start read late (more than the precision after the container started)",
			runningPod, func(i Identity) Identity { i.ProcessStart = t0.Add(1500 * time.Millisecond); return i }, false, 0},
		{"another container name",
			runningPod, func(i Identity) Identity { i.Container = "istiod"; return i }, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			use := id
			if c.id != nil {
				use = c.id(id)
			}
			mark, ok, why := OwnRun(c.pod(), use)
			if ok != c.ok {
				t.Fatalf("OwnRun ok = %v (%s), want %v", ok, why, c.ok)
			}
			if !ok {
				if why == "" {
					t.Error("no reason given")
				}
				return
			}
			mark.Holder = "h"
			if !mark.Complete() || mark.RestartCount != c.count || !mark.StartedAt.Time.Equal(started) || mark.ProcessStart.Time.Before(use.ProcessStart) {
				t.Errorf("mark = %+v", mark)
			}
		})
	}
}

// The published moment is never before the process's reading, though the
// mark stores microseconds.
func TestOwnRunRoundsTheProcessStartUp(t *testing.T) {
	id := Identity{Namespace: "istio-system", Pod: "meshd-0", UID: "uid-1", Container: "meshd", ProcessStart: alive.Add(1)}
	mark, ok, why := OwnRun(runningPod(), id)
	if !ok {
		t.Fatal(why)
	}
	if !mark.ProcessStart.Time.Equal(alive.Add(time.Microsecond)) {
		t.Errorf("ProcessStart = %v, want %v", mark.ProcessStart.Time, alive.Add(time.Microsecond))
	}
}

func TestIdentityValidate(t *testing.T) {
	if err := (Identity{Namespace: "istio-system", Pod: "meshd-0", UID: "6b1c", Container: "meshd"}).Validate(); err != nil {
		t.Fatal(err)
	}
	err := (Identity{Namespace: "Bad_NS", Pod: "", UID: "a b", Container: "x/y"}).Validate()
	if err == nil {
		t.Fatal("a bad identity was accepted")
	}
	for _, want := range []string{"namespace", "pod name must be set", "pod UID", "container name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
