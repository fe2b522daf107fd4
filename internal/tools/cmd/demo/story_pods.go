package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/meshdproc"
)

// Step 6 runs a mesh of its own: two meshd processes in Pods, at istiod's
// ttl, in a namespace of their own so that their elections do not mix with
// the first mesh's shorter ttl.
const (
	podMeshNamespace = "mesh-pods"
	podTTL           = 30 * time.Second
	podContainer     = "meshd"
	// kubeletDelay is when, after the kill, the demo reports the holder's
	// container terminated: about when a kubelet does.
	kubeletDelay = time.Second
	// podTarget is the report plus at most 100ms.
	podTarget = kubeletDelay + 100*time.Millisecond
)

var podMesh = []string{"pod-a", "pod-b"}

// ---- 6 ----

func (d *demo) step6() error {
	d.scr.heading("6. kill -9 at ttl 30s: failover on the kubelet's report, not the lease")
	d.scr.note("Two more instances, %s and %s, run in Pods of their own in namespace %s with", podMesh[0], podMesh[1], podMeshNamespace)
	d.scr.note("ttl %v (istiod's default) and POD_NAME, POD_NAMESPACE, POD_UID and CONTAINER_NAME set, as", podTTL)
	d.scr.note("the chart sets them from the downward API. The demo plays the kubelet: it creates their")
	d.scr.note("Pods and reports their containers running, and after the kill, terminated.")
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	if _, err := d.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podMeshNamespace}},
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", podMeshNamespace, err)
	}
	locks, err := newLockWatcher(d.client, podMeshNamespace)
	if err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(d.ctx)
	defer func() { stopWatch(); locks.stop() }()
	if err := locks.start(watchCtx); err != nil {
		return err
	}
	pods := map[string]*corev1.Pod{}
	for _, name := range podMesh {
		if pods[name], err = d.startInPod(ctx, name); err != nil {
			return err
		}
		if name == podMesh[0] {
			if _, err := locks.waitLock(d.ctx, settleTimeout, namespaceLock, name+" leads "+namespaceLock, isHolder(name)); err != nil {
				return err
			}
		}
	}
	victim, successor := podMesh[0], podMesh[1]
	mark, err := d.waitPodMark(namespaceLock, victim, settleTimeout)
	if err != nil {
		return err
	}
	d.scr.say("%s leads %s and names its run next to its record: Pod %s (uid %s), container %s, restart %d, alive at %s",
		victim, namespaceLock, mark.Pod, mark.UID, mark.Container, mark.RestartCount, mark.ProcessStart.UTC().Format("15:04:05.000000"))
	// The follower watches the holder's Pod from its first look at the
	// lock; give it a moment to be in its steady state.
	if err := sleep(d.ctx, time.Second); err != nil {
		return err
	}

	flags := d.watchLeaderFlags(successor)
	defer flags.stop()
	m := d.procs[victim]
	p := m.process()
	killed := time.Now()
	if err := p.Kill(); err != nil {
		return err
	}
	m.setState("killed (SIGKILL)")
	d.scr.say("sent SIGKILL to %s (pid %d); its lease has %v to run", victim, p.Pid(), podTTL)
	if err := sleep(d.ctx, time.Until(killed.Add(kubeletDelay))); err != nil {
		return err
	}
	if err := d.reportPod(ctx, pods[victim], func(cs *corev1.ContainerStatus) {
		cs.Ready = false
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error",
			StartedAt: cs.State.Running.StartedAt, FinishedAt: metav1.NewTime(killed)}}
	}); err != nil {
		return err
	}
	d.scr.say("+%s: the kubelet reports container %s of Pod %s terminated, exit code 137", ms(time.Since(killed)), podContainer, victim)

	const step = "6 kill -9, ttl 30s"
	l, err := locks.waitLock(d.ctx, podTTL+settleTimeout, namespaceLock, successor+" takes "+namespaceLock, isHolder(successor))
	if err != nil {
		return err
	}
	leads, err := flags.wait(d.ctx, successor, namespaceLock, true, flagTimeout)
	if err != nil {
		return err
	}
	d.scr.say("%s: %s -> %s: lock record at +%s, %s leads at +%s after the kill (the lease had %s left)",
		shortName(namespaceLock), victim, successor, ms(l.HolderSince.Sub(killed)), successor, ms(leads.Sub(killed)),
		ms(podTTL-l.HolderSince.Sub(killed)))
	d.record(result{step: step, election: shortName(namespaceLock), change: victim + " -> " + successor,
		lock: l.HolderSince.Sub(killed), leads: leads.Sub(killed), target: podTarget})

	d.scr.note("Why this is safe: %s took over on the kubelet's report of the end of exactly the run", successor)
	d.scr.note("%s published (same Pod UID, same container, same restart count, ended after a moment", victim)
	d.scr.note("at which %s was alive, on its node's clock). A run that ended cannot work any more.", victim)
	d.scr.note("Nothing weaker counts: a deleted or force-deleted Pod (its process may run on a node the")
	d.scr.note("control plane cannot reach), a Pod being deleted, a node NotReady, a missing or frozen")
	d.scr.note("status, a holder that published no Pod: each falls back to the lease, as without Pods.")
	return nil
}

// startInPod creates Pod name, starts meshd as its container and reports
// it running, as the kubelet would; it returns the Pod as last written.
func (d *demo) startInPod(ctx context.Context, name string) (*corev1.Pod, error) {
	pod, err := d.client.CoreV1().Pods(podMeshNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: podContainer, Image: "meshd:demo"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Pod %s: %w", name, err)
	}
	m := &member{name: name, revision: "stable", state: "not started"}
	d.mu.Lock()
	d.order = append(d.order, m)
	d.procs[name] = m
	d.mu.Unlock()
	// The kubelet reports a start in whole seconds; the process vouches
	// for its run only when that start is within the second before its
	// own first clock reading. Start just after a second begins, so that
	// the process's first reading falls in the same second.
	if err := sleep(d.ctx, time.Until(time.Now().Truncate(time.Second).Add(time.Second+20*time.Millisecond))); err != nil {
		return nil, err
	}
	started := time.Now()
	p, err := meshdproc.Start(meshdproc.Options{
		Binary: d.opts.meshd, Name: name, Kubeconfig: d.kubeconfig, Namespace: podMeshNamespace, Revision: "stable",
		TTL: podTTL, LogDir: filepath.Join(d.dir, "logs"), SelfSignedRoot: true,
		Env: []string{"POD_NAME=" + name, "POD_NAMESPACE=" + podMeshNamespace, "POD_UID=" + string(pod.UID), "CONTAINER_NAME=" + podContainer},
	})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	m.setState("starting")
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: podContainer, Image: "meshd:demo", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started.Truncate(time.Second))}},
	}}}
	if pod, err = d.client.CoreV1().Pods(podMeshNamespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("report Pod %s running: %w", name, err)
	}
	if err := p.WaitReady(ctx); err != nil {
		return nil, err
	}
	m.setState("ready")
	d.scr.say("started %-15s in Pod %s/%s (uid %s), ttl %v, pid %d; the kubelet reports it running",
		name, podMeshNamespace, name, pod.UID, podTTL, p.Pid())
	return pod, nil
}

// reportPod changes the status of pod's container and writes it through
// pods/status, as the kubelet does.
func (d *demo) reportPod(ctx context.Context, pod *corev1.Pod, change func(*corev1.ContainerStatus)) error {
	change(&pod.Status.ContainerStatuses[0])
	if _, err := d.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("report Pod %s: %w", pod.Name, err)
	}
	return nil
}

// waitPodMark waits until the ConfigMap lock name carries a Pod mark of
// holder and returns it.
func (d *demo) waitPodMark(name, holder string, timeout time.Duration) (lockmeta.HolderPod, error) {
	deadline := time.Now().Add(timeout)
	for {
		cm, err := d.client.CoreV1().ConfigMaps(podMeshNamespace).Get(d.ctx, name, metav1.GetOptions{})
		if err == nil {
			var mark lockmeta.HolderPod
			if raw, ok := cm.Annotations[lockmeta.HolderPodAnnotationKey]; ok && json.Unmarshal([]byte(raw), &mark) == nil &&
				mark.Complete() && mark.Holder == holder {
				return mark, nil
			}
		}
		if time.Now().After(deadline) {
			return lockmeta.HolderPod{}, fmt.Errorf("%s did not publish its Pod next to %s within %v", holder, name, timeout)
		}
		if err := sleep(d.ctx, 50*time.Millisecond); err != nil {
			return lockmeta.HolderPod{}, err
		}
	}
}
