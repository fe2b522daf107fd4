package podexit

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
)

// StartPrecision is the precision of the times a kubelet reports: the API
// stores container start and finish times in whole seconds, rounded down.
const StartPrecision = time.Second

// Proves reports whether pod, as a watch of the Pod that mark names last
// delivered it, proves that the holder's process that published mark has
// exited, and why or why not. It answers false whenever it is in doubt;
// see the package doc for why a true answer is sound.
func Proves(pod *corev1.Pod, mark lockmeta.HolderPod) (bool, string) {
	switch {
	case !mark.Complete():
		return false, "the holder published no complete Pod mark"
	case pod == nil:
		return false, "the holder's Pod is not known (missing, deleted, or not listed yet)"
	case pod.Namespace != mark.Namespace || pod.Name != mark.Pod:
		return false, fmt.Sprintf("Pod %s/%s is not the holder's", pod.Namespace, pod.Name)
	case string(pod.UID) != mark.UID:
		// A Pod object of the same name replaced the holder's: the old one
		// was deleted, maybe by force while its containers still run.
		return false, fmt.Sprintf("Pod %s/%s has UID %s, not the holder's %s", pod.Namespace, pod.Name, pod.UID, mark.UID)
	}
	cs := containerStatus(pod, mark.Container)
	if cs == nil {
		return false, fmt.Sprintf("Pod %s/%s reports no status of container %s", pod.Namespace, pod.Name, mark.Container)
	}
	alive := mark.ProcessStart.Time
	terminal := pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
	if t := cs.State.Terminated; t != nil && endedSince(t, alive) {
		// The run the status describes ended after the holder was alive:
		// it is the holder's run, or a later one. A terminal Pod runs
		// nothing again, so its count needs no check; otherwise the run
		// must not be older than the holder's.
		if terminal || cs.RestartCount >= mark.RestartCount {
			return true, fmt.Sprintf("container %s of Pod %s/%s terminated at %s (restart count %d; the holder's run is %d, alive at %s)",
				mark.Container, pod.Namespace, pod.Name, t.FinishedAt.UTC().Format(time.RFC3339), cs.RestartCount, mark.RestartCount,
				alive.UTC().Format(time.RFC3339Nano))
		}
	}
	if last := cs.LastTerminationState.Terminated; last != nil && cs.RestartCount > mark.RestartCount && endedSince(last, alive) {
		// Restarted: the previous run, whose number is at least the
		// holder's, ended after the holder was alive.
		return true, fmt.Sprintf("container %s of Pod %s/%s restarted (restart count %d, above the holder's %d); the previous run ended at %s",
			mark.Container, pod.Namespace, pod.Name, cs.RestartCount, mark.RestartCount, last.FinishedAt.UTC().Format(time.RFC3339))
	}
	return false, fmt.Sprintf("no end of the holder's run reported (container %s: %s, restart count %d; Pod phase %s)",
		mark.Container, stateName(cs.State), cs.RestartCount, pod.Status.Phase)
}

// endedSince reports whether t reports an end at or after alive. The
// reported finish is rounded down to the second, so it errs towards no.
func endedSince(t *corev1.ContainerStateTerminated, alive time.Time) bool {
	return !t.FinishedAt.IsZero() && !t.FinishedAt.Time.Before(alive)
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func stateName(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return "terminated"
	case s.Waiting != nil:
		return "waiting (" + s.Waiting.Reason + ")"
	}
	return "unknown"
}

// OwnRun returns the mark a holder with identity id may publish, when pod,
// its own Pod as read, describes this process's run: the Pod's UID is the
// identity's, and its container runs with a start the kubelet reported
// within StartPrecision before id.ProcessStart (a run that started
// earlier, or later, is not this process's, or cannot be told from an
// earlier run). The mark's Holder is left to the lock.
func OwnRun(pod *corev1.Pod, id Identity) (lockmeta.HolderPod, bool, string) {
	switch {
	case pod == nil:
		return lockmeta.HolderPod{}, false, "own Pod not known yet"
	case string(pod.UID) != id.UID:
		return lockmeta.HolderPod{}, false, fmt.Sprintf("own Pod %s/%s has UID %s, not %s", pod.Namespace, pod.Name, pod.UID, id.UID)
	case pod.DeletionTimestamp != nil:
		return lockmeta.HolderPod{}, false, "own Pod is being deleted"
	}
	cs := containerStatus(pod, id.Container)
	if cs == nil || cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() {
		return lockmeta.HolderPod{}, false, fmt.Sprintf("own container %s not reported running yet", id.Container)
	}
	started := cs.State.Running.StartedAt.Time
	if started.Before(id.ProcessStart.Add(-StartPrecision)) || started.After(id.ProcessStart) {
		return lockmeta.HolderPod{}, false, fmt.Sprintf("own container %s reported running since %s, which does not fit this process's start %s",
			id.Container, started.UTC().Format(time.RFC3339), id.ProcessStart.UTC().Format(time.RFC3339Nano))
	}
	mark := lockmeta.HolderPod{
		Namespace: id.Namespace, Pod: id.Pod, UID: id.UID, Container: id.Container,
		RestartCount: cs.RestartCount, StartedAt: cs.State.Running.StartedAt,
	}
	// The mark stores microseconds: round up, so that the published moment
	// is never before the reading (the process was alive at both).
	alive := id.ProcessStart.Round(0)
	if t := alive.Truncate(time.Microsecond); !t.Equal(alive) {
		alive = t.Add(time.Microsecond)
	}
	mark.ProcessStart.Time = alive
	return mark, true, ""
}
