package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubeletReportDelay is how long after a KillReportedLeader the run reports
// the container terminated: about when a kubelet does.
const kubeletReportDelay = time.Second

// podContainer is the container of every instance's Pod.
const podContainer = "meshd"

// kubeletPod is an instance's Pod, whose container status the run writes
// through pods/status as the kubelet of its node would: running at each
// start, terminated when told so after an exit, and at a start after an
// exit the restart (restart count up, the previous run's end as its last
// state).
type kubeletPod struct {
	client    kubernetes.Interface
	namespace string
	name      string
	uid       string

	mu       sync.Mutex
	runs     int         // starts reported
	started  metav1.Time // of the current or last run
	ended    time.Time   // when the last run exited; zero while it runs
	exitCode int32
}

// newKubeletPod creates the Pod an instance runs in.
func newKubeletPod(ctx context.Context, client kubernetes.Interface, namespace, name string) (*kubeletPod, error) {
	pod, err := client.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: podContainer, Image: "meshd:chaos"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Pod %s: %w", name, err)
	}
	return &kubeletPod{client: client, namespace: namespace, name: name, uid: string(pod.UID)}, nil
}

// env is what the chart sets from the downward API.
func (k *kubeletPod) env() []string {
	return []string{"POD_NAME=" + k.name, "POD_NAMESPACE=" + k.namespace, "POD_UID=" + k.uid, "CONTAINER_NAME=" + podContainer}
}

// alignStart waits until just after a second begins. The kubelet reports
// a start in whole seconds, and a process vouches for its run only when
// that start lies within the second before its own first clock reading:
// a process started just after the second begins reads its clock in it.
func (k *kubeletPod) alignStart() {
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
}

// exited notes that the current run ended at at with err.
func (k *kubeletPod) exited(at time.Time, err error) {
	code := int32(0)
	var xerr *exec.ExitError
	switch {
	case errors.As(err, &xerr) && xerr.ExitCode() >= 0:
		code = int32(xerr.ExitCode())
	case err != nil:
		code = 137 // killed by a signal
	}
	k.mu.Lock()
	k.ended, k.exitCode = at, code
	k.mu.Unlock()
}

func (k *kubeletPod) terminated() *corev1.ContainerStateTerminated {
	reason := "Completed"
	if k.exitCode != 0 {
		reason = "Error"
	}
	return &corev1.ContainerStateTerminated{ExitCode: k.exitCode, Reason: reason, StartedAt: k.started, FinishedAt: metav1.NewTime(k.ended)}
}

// reportRunning reports a run started at launched: the first, or a
// restart after the last run's end.
func (k *kubeletPod) reportRunning(ctx context.Context, launched time.Time) error {
	k.mu.Lock()
	cs := corev1.ContainerStatus{Name: podContainer, Image: "meshd:chaos", Ready: true, RestartCount: int32(max(k.runs, 0))}
	if k.runs > 0 && !k.ended.IsZero() {
		cs.LastTerminationState = corev1.ContainerState{Terminated: k.terminated()}
	}
	k.runs++
	k.started, k.ended = metav1.NewTime(launched.Truncate(time.Second)), time.Time{}
	cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: k.started}}
	k.mu.Unlock()
	return k.write(ctx, corev1.PodRunning, cs)
}

// reportTerminated reports the current run ended (by its exit, or at
// killed when the exit is not known yet).
func (k *kubeletPod) reportTerminated(ctx context.Context, killed time.Time) error {
	k.mu.Lock()
	if k.ended.IsZero() {
		k.ended, k.exitCode = killed, 137
	}
	cs := corev1.ContainerStatus{Name: podContainer, Image: "meshd:chaos", RestartCount: int32(max(k.runs-1, 0)),
		State: corev1.ContainerState{Terminated: k.terminated()}}
	k.mu.Unlock()
	return k.write(ctx, corev1.PodRunning, cs)
}

func (k *kubeletPod) write(ctx context.Context, phase corev1.PodPhase, cs corev1.ContainerStatus) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods := k.client.CoreV1().Pods(k.namespace)
	pod, err := pods.Get(ctx, k.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("report Pod %s: %w", k.name, err)
	}
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("report Pod %s: %w", k.name, err)
	}
	return nil
}
