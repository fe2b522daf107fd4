package sim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meshd-io/meshd/internal/lockcap"
	"github.com/meshd-io/meshd/pkg/resourcelock"
)

// Pods. A candidate with CandidateSpec.Pod runs in a Pod of that name: the
// world creates the Pod before the schedule begins and plays the kubelet of
// its node, which reports what the process does after KubeletDelay, on the
// node's clock (the world's), in whole seconds as the API stores them:
//
//   - a process start as its container running since that second, its
//     restart count one more than the run before in the same Pod, and the
//     run before as the last termination;
//   - a crash, or the end of a process stopped gracefully (once it has
//     ended), as the container terminated at that second;
//
// and the world's faults: a forced delete removes the Pod object while its
// process runs on (nothing about that process is reported again, and a
// controller re-creates a Pod of the same name with a new UID whose
// container has terminated: a lure); a node partition freezes the Pod's
// status while its process runs on, and the kubelet reports the truth when
// the partition ends. Pods go straight to the in-memory API, without the
// actors' faults.

// podContainer is the name of the container every process runs in.
const podContainer = "meshd"

// simPod is the kubelet's state of one Pod.
type simPod struct {
	name string
	uid  types.UID
	// runs counts the processes started in the Pod object; the first has
	// restart count 0.
	runs int
	// running is the current run: its start and restart count; ended is
	// the last run that ended, with its end.
	running  *podRun
	ended    *podRun
	frozen   bool // the node is partitioned: nothing is reported
	replaced int  // how many times a forced delete replaced the object
}

type podRun struct {
	start, end time.Time
	restarts   int32
	process    *candidate // the process of the run
}

// podOf returns the kubelet's state of the Pod named name, creating the
// Pod object the first time.
func (w *World) podOf(name string) *simPod {
	if p := w.pods[name]; p != nil {
		return p
	}
	p := &simPod{name: name, uid: types.UID(name + "-uid-0")}
	if w.pods == nil {
		w.pods = map[string]*simPod{}
	}
	w.pods[name] = p
	w.putPod(p, false)
	return p
}

// podStarted is a process of c starting in its Pod now; it returns the
// Pod's UID for the process's identity.
func (w *World) podStarted(c *candidate) types.UID {
	p := w.podOf(c.spec.Pod)
	if p.running != nil {
		// The process before still runs (a graceful stop not over yet): a
		// container runs one process at a time, so this one starts in a
		// Pod of its own, as a rollout's new Pod does.
		w.podSeq++
		c.spec.Pod = fmt.Sprintf("%s-%d", c.spec.Pod, w.podSeq)
		p = w.podOf(c.spec.Pod)
	}
	p.running = &podRun{start: w.clock.Now(), restarts: int32(p.runs), process: c}
	p.runs++
	w.kubeletReports(p)
	return p.uid
}

// podEnded is c's process ending now (a crash, or the end of a graceful
// stop).
func (w *World) podEnded(c *candidate) {
	p := w.pods[c.spec.Pod]
	if p == nil || p.running == nil || p.running.process != c || c.podUID != p.uid {
		return // not the run under way (a process of an earlier run, or a Pod deleted by force)
	}
	p.ended, p.running = p.running, nil
	p.ended.end = w.clock.Now()
	w.kubeletReports(p)
}

// kubeletReports writes the Pod's state as of now into its status after
// KubeletDelay, unless the node is partitioned then.
func (w *World) kubeletReports(p *simPod) {
	running, ended, uid := p.running, p.ended, p.uid
	w.After(w.sched.KubeletDelay, "kubelet reports Pod "+p.name, func(w *World) {
		if p.frozen || p.uid != uid {
			return
		}
		w.writePodStatus(p, running, ended)
	})
}

// writePodStatus writes what the kubelet knows of p's runs.
func (w *World) writePodStatus(p *simPod, running, ended *podRun) {
	sec := func(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }
	cs := corev1.ContainerStatus{Name: podContainer}
	switch {
	case running != nil:
		cs.RestartCount = running.restarts
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: sec(running.start)}
		if ended != nil {
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
				StartedAt: sec(ended.start), FinishedAt: sec(ended.end), ExitCode: 137}
		}
	case ended != nil:
		cs.RestartCount = ended.restarts
		cs.State.Terminated = &corev1.ContainerStateTerminated{StartedAt: sec(ended.start), FinishedAt: sec(ended.end), ExitCode: 137}
	default:
		return
	}
	pod, err := w.api.cs.CoreV1().Pods(w.sched.Namespace).Get(context.Background(), p.name, metav1.GetOptions{})
	if err != nil {
		return
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	if _, err := w.api.cs.CoreV1().Pods(w.sched.Namespace).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		w.j.logf("kubelet: %v", err)
		return
	}
	w.j.logf("kubelet: Pod %s container %s", p.name, describeContainer(cs))
	w.podChanged()
}

func describeContainer(cs corev1.ContainerStatus) string {
	switch {
	case cs.State.Running != nil:
		return fmt.Sprintf("running since %s (restart count %d)", cs.State.Running.StartedAt.Sub(epoch), cs.RestartCount)
	case cs.State.Terminated != nil:
		return fmt.Sprintf("terminated at %s (restart count %d)", cs.State.Terminated.FinishedAt.Sub(epoch), cs.RestartCount)
	}
	return "unknown"
}

// putPod creates the Pod object of p (update: replaces its status).
func (w *World) putPod(p *simPod, update bool) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: w.sched.Namespace, UID: p.uid},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: podContainer}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	if _, err := w.api.cs.CoreV1().Pods(w.sched.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		w.j.logf("kubelet: %v", err)
	}
}

// ForceDeletePod deletes the Pod of candidate name at once, as
// `kubectl delete --force --grace-period=0` does, while its process runs
// on; after a while a controller creates a Pod of the same name with a new
// UID, whose container has terminated.
func (w *World) ForceDeletePod(name string, recreateAfter time.Duration) {
	c := w.find(name)
	if c == nil || c.spec.Pod == "" {
		return
	}
	p := w.podOf(c.spec.Pod)
	w.noteFault()
	if err := w.api.cs.CoreV1().Pods(w.sched.Namespace).Delete(context.Background(), p.name, metav1.DeleteOptions{}); err != nil {
		w.j.logf("force delete: %v", err)
		return
	}
	w.j.logf("Pod %s deleted by force; its process runs on", p.name)
	w.podChanged()
	p.replaced++
	p.uid = types.UID(fmt.Sprintf("%s-uid-%d", p.name, p.replaced))
	p.runs, p.running, p.ended = 0, nil, nil
	w.After(recreateAfter, "a controller re-creates Pod "+p.name, func(w *World) {
		w.putPod(p, false)
		now := w.clock.Now()
		w.writePodStatus(p, nil, &podRun{start: now, end: now})
	})
}

// PartitionNode cuts the node of candidate name's Pod off for d: its
// status is frozen while its process runs on (or dies), and the kubelet
// reports the truth when the partition ends.
func (w *World) PartitionNode(name string, d time.Duration) {
	c := w.find(name)
	if c == nil || c.spec.Pod == "" {
		return
	}
	p := w.podOf(c.spec.Pod)
	w.Fault("partition of the node of Pod "+p.name, d, func(w *World) {
		p.frozen = true
		// The node controller marks the Pod not ready when the node stops
		// reporting; the container's status stays as last reported.
		w.After(time.Second, "the node controller marks Pod "+p.name+" not ready", func(w *World) {
			if p.frozen {
				w.setPodReady(p, false)
			}
		})
	}, func(w *World) {
		p.frozen = false
		w.setPodReady(p, true)
		w.writePodStatus(p, p.running, p.ended)
	})
}

// setPodReady sets the Ready condition of p's Pod object.
func (w *World) setPodReady(p *simPod, ready bool) {
	pods := w.api.cs.CoreV1().Pods(w.sched.Namespace)
	pod, err := pods.Get(context.Background(), p.name, metav1.GetOptions{})
	if err != nil {
		return
	}
	cond := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	if !ready {
		cond.Status, cond.Reason = corev1.ConditionFalse, "NodeLost"
	}
	pod.Status.Conditions = []corev1.PodCondition{cond}
	if _, err := pods.UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		w.j.logf("node controller: %v", err)
		return
	}
	w.j.logf("node controller: Pod %s ready %v", p.name, ready)
	w.podChanged()
}

// podChanged wakes every elector when a naive judge decides (it has no
// watch of its own).
func (w *World) podChanged() {
	if !w.sched.NaiveHolderExit {
		return
	}
	for _, c := range w.cands {
		c.mu.Lock()
		le := c.le
		c.mu.Unlock()
		if le != nil && c.alive() {
			le.Trigger()
		}
	}
}

// naiveExit is the Pod-aware failover one might write without the proof
// rules of package podexit: it takes the holder's process for gone when its
// Pod is missing, is being deleted, is not ready, or reports its container
// terminated now or before its last restart, whichever Pod of that name it
// is and whichever run. Scenarios run with it
// (Schedule.NaiveHolderExit) to show that they catch each of these.
type naiveExit struct {
	w     *World
	marks lockcap.HolderPodReader
}

func (n naiveExit) Exited(rec resourcelock.Record) bool {
	mark, ok := n.marks.HolderPod()
	if !ok || mark.Holder != rec.HolderIdentity || rec.HolderIdentity == "" {
		return false
	}
	pod, err := n.w.api.cs.CoreV1().Pods(mark.Namespace).Get(context.Background(), mark.Pod, metav1.GetOptions{})
	if err != nil || pod.DeletionTimestamp != nil {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse {
			return true
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}

// podEndOnceStopped reports the end of c's process, stopped gracefully,
// once it has ended: it looks every 100ms, for at most a minute.
func (w *World) podEndOnceStopped(c *candidate, looks int) {
	select {
	case <-c.stopped():
		w.podEnded(c)
		return
	default:
	}
	if looks < 600 {
		w.After(100*time.Millisecond, "", func(w *World) { w.podEndOnceStopped(c, looks+1) })
	}
}
