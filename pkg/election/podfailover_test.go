package election

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/meshd-io/meshd/internal/election/defaultwatch"
	"github.com/meshd-io/meshd/internal/election/podexit"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/kubetest"
)

func TestPodOptionsRefuseBadInput(t *testing.T) {
	client := kubetest.NewClientset()
	noDefault := WithDefaultWatcher(defaultwatch.NewStatic(""))
	_, err := NewLeaderElection(testNS, "a", IngressController, "stable", client, noDefault,
		WithPodIdentity(PodIdentity{Pod: "meshd-0", Container: "Not_A_Name"}))
	if err == nil {
		t.Fatal("an incomplete Pod identity was accepted")
	}
	for _, want := range []string{"WithPodIdentity", "namespace must be set", "pod UID must be set", "invalid container name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The zero identity turns publishing off; it is not an error.
	le, err := NewLeaderElection(testNS, "a", IngressController, "stable", client, noDefault,
		WithPodIdentity(PodIdentity{Namespace: testNS, Pod: "p", UID: "u", Container: "c"}), WithPodIdentity(PodIdentity{}))
	if err != nil || le.pod.publisher != nil {
		t.Errorf("the zero Pod identity: err %v, publisher %v", err, le.pod.publisher)
	}
	_, err = NewLeaderElection(testNS, "a", IngressController, "stable", client, noDefault, WithWatch(false), WithPodFailover(true))
	if err == nil || !strings.Contains(err.Error(), "WithPodFailover needs the watch") {
		t.Errorf("Pod failover without the watch: %v", err)
	}
}

// podFor is the holder's Pod as the kubelet reports it: its container
// running since startedAt, restarted restarts times.
func podFor(name, uid string, startedAt time.Time, restarts int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: k8stypes.UID("uid-" + uid)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "meshd", RestartCount: restarts,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}},
		}}},
	}
}

// The holder publishes its run once its Pod shows it, a follower takes
// over as soon as the Pod reports the holder's container terminated (the
// lease is 30s), and every Pod watch stops with the elections.
func TestPodFailoverTakesOverOnTheKubeletsReport(t *testing.T) {
	now := time.Now()
	startedAt := now.Add(-2 * time.Second).Truncate(time.Second)
	alive := startedAt.Add(300 * time.Millisecond)
	client := kubetest.NewClientset(podFor("meshd-a", "a", startedAt, 0))
	shared := NewShared()
	opts := []Option{WithShared(shared), WithDefaultWatcher(defaultwatch.NewStatic("")),
		withTiming(30*time.Second, 2*time.Second, time.Second), WithReleaseOnCancel(false), WithPodFailover(true)}
	a := start(t, mustElection(t)(NewLeaderElection(testNS, "a", IngressController, "stable", client,
		append(opts, WithPodIdentity(PodIdentity{Namespace: testNS, Pod: "meshd-a", UID: "uid-a", Container: "meshd", ProcessStart: alive}))...)))
	eventually(t, "a leads", a.isRunning)
	eventually(t, "a publishes its run", func() bool {
		cm, err := client.CoreV1().ConfigMaps(testNS).Get(context.Background(), IngressController, metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Annotations[lockmeta.HolderPodAnnotationKey], `"uid":"uid-a"`)
	})
	b := start(t, mustElection(t)(NewLeaderElection(testNS, "b", IngressController, "stable", client, opts...)))
	eventually(t, "b sees a", func() bool { return b.le.elector.GetLeader() == "a" })
	if b.isRunning() {
		t.Fatal("b leads beside a")
	}
	// a's process dies (no release); the kubelet reports it.
	a.shutdown()
	pod := podFor("meshd-a", "a", startedAt, 0)
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 137, Reason: "OOMKilled", StartedAt: metav1.NewTime(startedAt), FinishedAt: metav1.NewTime(time.Now())}}
	reported := time.Now()
	if _, err := client.CoreV1().Pods(testNS).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b leads", b.isRunning)
	if took := time.Since(reported); took > 5*time.Second {
		t.Errorf("b took over %v after the report; the lease is 30s, the proof should take milliseconds", took)
	}
	b.shutdown()
	if n := shared.running().PodWatches; n != 0 {
		t.Errorf("%d Pod watches run after the elections returned", n)
	}
}

// A holder's Pod mark goes out only while its work runs: during the fence
// of a forced steal a proof of its exit must not end the wait that
// protects the work of the holder before it.
func TestPodMarkIsPublishedOnlyWhileTheWorkRuns(t *testing.T) {
	startedAt := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	client := kubetest.NewClientset(podFor("meshd-a", "a", startedAt, 0))
	pub, err := podexit.NewPublisher(client, podexit.NewWatches(), podexit.Identity{Namespace: testNS, Pod: "meshd-a",
		UID: "uid-a", Container: "meshd", ProcessStart: startedAt.Add(300 * time.Millisecond)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Start(nil)()
	eventually(t, "the publisher sees its run", func() bool { _, ok := pub.Mark(); return ok })
	var working atomic.Bool
	source := (&podAware{publisher: pub}).source(working.Load)
	if _, ok := source(); ok {
		t.Error("the mark was supplied before the work started")
	}
	working.Store(true)
	if mark, ok := source(); !ok || mark.UID != "uid-a" {
		t.Errorf("the mark while the work runs: %+v, %v", mark, ok)
	}
	working.Store(false)
	if _, ok := source(); ok {
		t.Error("the mark was supplied after the work ended")
	}
}
