package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshd-io/meshd/internal/election/testknobs"
	"github.com/meshd-io/meshd/internal/ledger"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/testing/testutil"
	"github.com/meshd-io/meshd/pkg/election"
)

// Pod-aware failover on a real API server. The tests play the kubelet:
// they create the holder's Pod and write its status through the status
// subresource, as a kubelet reports a container's start, end and restart.
// The lease is 30s (renewed every second, so that the holder publishes its
// run soon), so any takeover within seconds is one on proof.
const podTTL = 30 * time.Second

// podOpts are the options of a Pod-aware candidate: a 30s lease, no
// release when stopped (a stop is a crash), followers watching Pods.
func podOpts(t *testing.T, extra ...election.Option) []election.Option {
	return append([]election.Option{
		testknobs.Timing(podTTL, 2*time.Second, time.Second),
		election.WithEnabled(true),
		election.WithPrioritized(true),
		election.WithReleaseOnCancel(false),
		election.WithStopTimeout(time.Second),
		election.WithLogger(zaptest.NewLogger(t).Named("election")),
		election.WithPodFailover(true),
	}, extra...)
}

// kubelet writes a Pod's status as the kubelet of its node would.
type kubelet struct {
	t      *testing.T
	client kubernetes.Interface
	ns     string
}

// createPod creates Pod name with one container, meshd, and reports it
// running since startedAt (whole seconds, as the API stores it). It
// returns the Pod's UID.
func (k kubelet) createPod(name string, startedAt time.Time) string {
	k.t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "meshd", Image: "meshd:test"}},
			NodeName: "node-1"},
	}
	created, err := k.client.CoreV1().Pods(k.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	k.report(name, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "meshd", Image: "meshd:test", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}}}}
	})
	return string(created.UID)
}

// report changes the Pod's status and writes it through pods/status.
func (k kubelet) report(name string, change func(*corev1.PodStatus)) time.Time {
	k.t.Helper()
	ctx := context.Background()
	pod, err := k.client.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		k.t.Fatal(err)
	}
	change(&pod.Status)
	if _, err := k.client.CoreV1().Pods(k.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		k.t.Fatal(err)
	}
	return time.Now()
}

// holderIdentity is the Pod identity of the holder's process in Pod name
// with uid, which read its clock at alive.
func holderIdentity(ns, name, uid string, alive time.Time) election.Option {
	return election.WithPodIdentity(election.PodIdentity{Namespace: ns, Pod: name, UID: uid, Container: "meshd", ProcessStart: alive})
}

// waitForMark waits until the lock names holder's Pod run restarts.
func waitForMark(t *testing.T, client kubernetes.Interface, ns, holder string, restarts int32) {
	t.Helper()
	last := ""
	testutil.Eventually(t, 10*time.Second, func() error {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), election.IngressController, metav1.GetOptions{})
		if err != nil {
			return err
		}
		raw, ok := cm.Annotations[lockmeta.HolderPodAnnotationKey]
		last = raw
		if ok && strings.Contains(raw, `"holder":"`+holder+`"`) &&
			strings.Contains(raw, `"restartCount":`+strconv.Itoa(int(restarts))+`,`) {
			return nil
		}
		return fmt.Errorf("%s to publish run %d; the lock's mark is %q", holder, restarts, last)
	})
}

// podHolder starts holder a in Pod meshd-a and waits until it leads and
// has published its run; it returns a and the Pod's UID.
func podHolder(t *testing.T, c *testcluster.Cluster, ns string, k kubelet) (*instance, string, time.Time) {
	return podHolderStartedBefore(t, c, ns, k, 3*time.Second)
}

// podHolderStartedBefore is podHolder for a container that the kubelet
// reports started ago (in whole seconds), its process alive 300ms later.
func podHolderStartedBefore(t *testing.T, c *testcluster.Cluster, ns string, k kubelet, ago time.Duration) (*instance, string, time.Time) {
	t.Helper()
	startedAt := time.Now().Add(-ago).Truncate(time.Second)
	alive := startedAt.Add(300 * time.Millisecond)
	uid := k.createPod("meshd-a", startedAt)
	le, err := election.NewLeaderElection(ns, "a", election.IngressController, "stable", c.Client,
		podOpts(t, holderIdentity(ns, "meshd-a", uid, alive))...)
	a := newInstance(t, "a", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead", a.leads))
	waitForMark(t, c.Client, ns, "a", 0)
	return a, uid, startedAt
}

// follower starts candidate b, which watches Pods, and waits until it has
// seen a as the holder.
func podFollower(t *testing.T, c *testcluster.Cluster, ns string) *instance {
	t.Helper()
	le, err := election.NewLeaderElection(ns, "b", election.IngressController, "stable", c.Client, podOpts(t)...)
	b := newInstance(t, "b", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("b to see a", func() bool { return b.le.Status().Holder == "a" }))
	return b
}

// (a) The holder's container is reported terminated: the follower takes
// over within 1.1s of the report, against a 30s lease.
func TestPodFailoverOnTheKubeletsReportOfTheHoldersEnd(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	k := kubelet{t: t, client: c.Client, ns: ns}
	a, _, startedAt := podHolder(t, c, ns, k)
	b := podFollower(t, c, ns)
	testutil.Consistently(t, time.Second, testutil.Check("a alone leads", func() bool { return a.leads() && !b.leads() }))

	a.stop() // the process is killed: no release
	reported := k.report("meshd-a", func(s *corev1.PodStatus) {
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "OOMKilled", StartedAt: metav1.NewTime(startedAt), FinishedAt: metav1.NewTime(time.Now())}}
		s.ContainerStatuses[0].Ready = false
	})
	testutil.Eventually(t, 5*time.Second, testutil.Check("b to take over", b.leads))
	took := b.lastStart().Sub(reported)
	t.Logf("b started %v after the kubelet's report (lease %v)", took, podTTL)
	if took > 1100*time.Millisecond {
		t.Errorf("b started %v after the report; want under 1.1s", took)
	}
}

// (b) A forced delete of the holder's Pod, and a new Pod of the same name
// (a StatefulSet's replacement) whose container is then reported
// terminated, while the holder's process runs on: no early takeover.
func TestPodFailoverIgnoresAForcedDelete(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	k := kubelet{t: t, client: c.Client, ns: ns}
	a, _, _ := podHolder(t, c, ns, k)
	b := podFollower(t, c, ns)

	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), "meshd-a",
		metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testutil.Consistently(t, 2*time.Second, testutil.Check("a leads, b waits", func() bool { return a.leads() && !b.leads() }))
	k.createPod("meshd-a", time.Now().Truncate(time.Second))
	k.report("meshd-a", func(s *corev1.PodStatus) {
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", FinishedAt: metav1.NewTime(time.Now().Add(2 * time.Second))}}
		s.Phase = corev1.PodFailed
	})
	testutil.Consistently(t, 2*time.Second, testutil.Check("a leads, b waits", func() bool { return a.leads() && !b.leads() }))
}

// (c) A node partition: the kubelet's reports stop (the status is frozen,
// the Pod is marked not ready and its node unreachable by the control
// plane) while the holder's process runs on and renews: no early
// takeover.
func TestPodFailoverIgnoresAPartitionedNode(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	k := kubelet{t: t, client: c.Client, ns: ns}
	a, _, _ := podHolder(t, c, ns, k)
	b := podFollower(t, c, ns)

	k.report("meshd-a", func(s *corev1.PodStatus) {
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "NodeNotReady",
			LastTransitionTime: metav1.Now()}}
		s.ContainerStatuses[0].Ready = false
	})
	pod, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "meshd-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The taint manager's eviction of a Pod on an unreachable node: a
	// graceful delete, which sets the deletion timestamp and waits for the
	// kubelet that does not answer.
	pod.Finalizers = []string{"example.com/keep"}
	if _, err := c.Client.CoreV1().Pods(ns).Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), "meshd-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "meshd-a", metav1.GetOptions{}); err == nil {
			p.Finalizers = nil
			_, _ = c.Client.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{})
		}
	})
	testutil.Consistently(t, 3*time.Second, testutil.Check("a leads, b waits", func() bool { return a.leads() && !b.leads() }))
}

// overlap reports whether two instances ever ran their work at the same
// time, by the start and stop times their run functions recorded.
func overlap(x, y *instance) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	y.mu.Lock()
	defer y.mu.Unlock()
	far := time.Now().Add(time.Hour)
	spans := func(in *instance) [][2]time.Time {
		var out [][2]time.Time
		for i, s := range in.started {
			e := far
			if i < len(in.stopped) {
				e = in.stopped[i]
			}
			out = append(out, [2]time.Time{s, e})
		}
		return out
	}
	for _, p := range spans(x) {
		for _, q := range spans(y) {
			if p[0].Before(q[1]) && q[0].Before(p[1]) {
				return true
			}
		}
	}
	return false
}

// (d) The holder's container restarts under the same Pod name and the
// same identity: the successor takes over on the kubelet's report of the
// restart, and the restarted holder never runs its work beside it, whether
// it starts after the successor took over or before the report.
func TestPodFailoverOnARestartUnderTheSameName(t *testing.T) {
	t.Parallel()
	for _, restartedFirst := range []bool{false, true} {
		name := "successor first"
		if restartedFirst {
			name = "restarted holder first"
		}
		t.Run(name, func(t *testing.T) {
			c := testcluster.Get(t)
			ns := c.NewNamespace(t)
			k := kubelet{t: t, client: c.Client, ns: ns}
			a, uid, startedAt := podHolder(t, c, ns, k)
			restartedAt := time.Now()
			b := podFollower(t, c, ns)

			a.stop() // the container is killed; the kubelet starts it again
			restartedAt = time.Now()
			var mu sync.Mutex
			var again *instance
			startAgain := func() {
				// The restarted process started when the kubelet restarted
				// its container.
				le, err := election.NewLeaderElection(ns, "a", election.IngressController, "stable", c.Client,
					podOpts(t, holderIdentity(ns, "meshd-a", uid, restartedAt))...)
				in := newInstance(t, "a (restarted)", le, err)
				mu.Lock()
				again = in
				mu.Unlock()
			}
			if restartedFirst {
				startAgain()
				testutil.Eventually(t, 10*time.Second, testutil.Check("the restarted a to lead", again.leads))
			}
			reported := k.report("meshd-a", func(s *corev1.PodStatus) {
				s.ContainerStatuses[0].RestartCount = 1
				s.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 137, Reason: "OOMKilled", StartedAt: metav1.NewTime(startedAt), FinishedAt: metav1.NewTime(restartedAt)}}
				s.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{
					StartedAt: metav1.NewTime(restartedAt.Truncate(time.Second))}}
			})
			if !restartedFirst {
				testutil.Eventually(t, 5*time.Second, testutil.Check("b to take over", b.leads))
				if took := b.lastStart().Sub(reported); took > 1100*time.Millisecond {
					t.Errorf("b started %v after the report of the restart; want under 1.1s", took)
				}
				startAgain()
			}
			if restartedFirst {
				// The restarted holder publishes its own run, 1, once its
				// Pod shows it; the report of the restart proves nothing
				// to b about it.
				waitForMark(t, c.Client, ns, "a", 1)
			} else {
				testutil.Eventually(t, 10*time.Second, testutil.Check("the restarted a to see b", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return again.le.Status().Holder == "b"
				}))
			}
			testutil.Consistently(t, 3*time.Second, testutil.Check("one leader", func() bool {
				return len(leaders(a, b, again)) == 1
			}))
			if overlap(b, again) || overlap(a, b) {
				t.Fatal("the successor and a process of the holder ran their work at the same time")
			}
		})
	}
}

// A run that lasted less than the precision of the kubelet's times: the
// restarted holder starts in the second its predecessor started, reads the
// status of that earlier run (not yet updated), cannot tell it from its
// own and publishes it. The report of its own start must still prove
// nothing to the follower while the restarted holder lives: the end of
// the earlier run is before its process's start. The restarted holder
// withdraws its mark once its Pod reports a later run than it published.
func TestPodFailoverSurvivesARunShorterThanTheTimesPrecision(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	k := kubelet{t: t, client: c.Client, ns: ns}
	a, uid, startedAt := podHolderStartedBefore(t, c, ns, k, 0)
	b := podFollower(t, c, ns)

	a.stop()
	restartedAt := time.Now()
	le, err := election.NewLeaderElection(ns, "a", election.IngressController, "stable", c.Client,
		podOpts(t, holderIdentity(ns, "meshd-a", uid, restartedAt))...)
	again := newInstance(t, "a (restarted)", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("the restarted a to lead", again.leads))
	k.report("meshd-a", func(s *corev1.PodStatus) {
		s.ContainerStatuses[0].RestartCount = 1
		s.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "OOMKilled", StartedAt: metav1.NewTime(startedAt), FinishedAt: metav1.NewTime(restartedAt)}}
		s.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{
			StartedAt: metav1.NewTime(restartedAt.Truncate(time.Second))}}
	})
	testutil.Consistently(t, 3*time.Second, testutil.Check("the restarted a leads alone", func() bool {
		return again.leads() && !b.leads()
	}))
	if overlap(b, again) {
		t.Fatal("the successor ran its work beside the restarted holder")
	}
}

// waitForLeaseMark waits until Lease lock name carries a Pod mark of
// holder, at most within; it returns when it was first seen.
func waitForLeaseMark(t *testing.T, client kubernetes.Interface, ns, name, holder string, within time.Duration) time.Time {
	t.Helper()
	last := ""
	testutil.Eventually(t, within, func() error {
		lease, err := client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		last = lease.Annotations[lockmeta.HolderPodAnnotationKey]
		if strings.Contains(last, `"holder":"`+holder+`"`) {
			return nil
		}
		return fmt.Errorf("a Pod mark of %s; the lock's mark is %q", holder, last)
	})
	return time.Now()
}

// A holder in session mode names its Pod as well. It takes the lock before
// the kubelet has reported its container running, so its first record has
// no mark, and it leaves its renewals to its session (no record writes);
// it writes its record with the mark as soon as its own Pod shows its run,
// instead of never. A follower in session mode then takes over on the
// kubelet's report of the holder's end, not a lease (and a session) later,
// and the two never run their work at once.
func TestPodFailoverWithSessions(t *testing.T) {
	t.Parallel()
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	k := kubelet{t: t, client: c.Client, ns: ns}
	ctx := context.Background()
	created, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "meshd-a"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "meshd", Image: "meshd:test"}}, NodeName: "node-1"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alive := time.Now()
	startedAt := alive.Truncate(time.Second)
	l := &ledger.Ledger{}
	aLink, bLink := newFaultLink(t, c), newFaultLink(t, c)
	le, err := election.New(aLink.client, leaseSpec(ns, "pods", "a"), append(podOpts(t, election.WithSessions(true),
		holderIdentity(ns, "meshd-a", string(created.UID), alive)), election.WithShared(aLink.shared))...)
	a := ledgered(t, l, "a", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("a to lead through its session", func() bool {
		if _, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, "pods", metav1.GetOptions{}); err != nil {
			return false
		}
		holder, mark := sessionMark(t, c, ns, "pods")
		return a.leads() && holder == "a" && mark.Session != ""
	}))
	time.Sleep(2 * time.Second) // the renewals are the session's now
	if lease, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, "pods", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if raw, ok := lease.Annotations[lockmeta.HolderPodAnnotationKey]; ok {
		t.Fatalf("a published a Pod mark before its Pod showed its run: %s", raw)
	}

	reported := k.report("meshd-a", func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: "meshd", Image: "meshd:test", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}}}}
	})
	// Well within a RetryPeriod (1s): the mark does not wait for a renew.
	seen := waitForLeaseMark(t, c.Client, ns, "pods", "a", 900*time.Millisecond)
	t.Logf("a's Pod mark on its record %v after the kubelet reported a's container running", seen.Sub(reported))
	if holder, mark := sessionMark(t, c, ns, "pods"); holder != "a" || mark.Session == "" {
		t.Fatalf("the record with the Pod mark names holder %q, session %q: want a through its session", holder, mark.Session)
	}

	le, err = election.New(bLink.client, leaseSpec(ns, "pods", "b"), append(podOpts(t, election.WithSessions(true)),
		election.WithShared(bLink.shared))...)
	b := ledgered(t, l, "b", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("b to see a", func() bool { return b.le.Status().Holder == "a" }))
	testutil.Consistently(t, time.Second, testutil.Check("a alone leads", func() bool { return a.leads() && !b.leads() }))

	// The crash: a's process reaches nothing any more (its session is not
	// ended), and its work is gone by the time the kubelet reports it.
	aLink.cut.Store(true)
	testutil.Eventually(t, 5*time.Second, testutil.Check("a's work to stop", func() bool { return !a.leads() }))
	ended := k.report("meshd-a", func(s *corev1.PodStatus) {
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: "Error", StartedAt: metav1.NewTime(startedAt), FinishedAt: metav1.NewTime(time.Now())}}
		s.ContainerStatuses[0].Ready = false
	})
	testutil.Eventually(t, 5*time.Second, testutil.Check("b to take over", b.leads))
	took := b.lastStart().Sub(ended)
	t.Logf("b started %v after the kubelet's report (lease %v, a's session never ended)", took, podTTL)
	if took > 1100*time.Millisecond {
		t.Errorf("b started %v after the report; want under 1.1s", took)
	}
	if o := l.Overlaps(); len(o) != 0 {
		t.Fatalf("two leaders ran at once: %+v", o)
	}
}

// A successor that took over on proof names its own Pod with its first
// write after its work started (the mark never goes out before the work
// runs: see election's podAware.source), so that its own crash is proven
// as soon as the kubelet reports it: the failover chains without waiting
// for a lease.
func TestPodFailoverChainsOnceTheSuccessorsWorkRuns(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.NewNamespace(t)
	k := kubelet{t: t, client: c.Client, ns: ns}
	a, _, startedA := podHolder(t, c, ns, k)
	startedB := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	uidB := k.createPod("meshd-b", startedB)
	le, err := election.NewLeaderElection(ns, "b", election.IngressController, "stable", c.Client,
		podOpts(t, holderIdentity(ns, "meshd-b", uidB, startedB.Add(300*time.Millisecond)))...)
	b := newInstance(t, "b", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("b to see a", func() bool { return b.le.Status().Holder == "a" }))

	terminated := func(started time.Time) func(*corev1.PodStatus) {
		return func(s *corev1.PodStatus) {
			s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "Error", StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(time.Now())}}
			s.ContainerStatuses[0].Ready = false
		}
	}
	a.stop()
	k.report("meshd-a", terminated(startedA))
	testutil.Eventually(t, 5*time.Second, testutil.Check("b to take over", b.leads))
	// The takeover write carries no mark (b's work had not started); b's
	// first renew after its work started does, a retry period (1s) later.
	var raw string
	testutil.Eventually(t, 3*time.Second, testutil.Check("b's record to carry b's Pod mark", func() bool {
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), election.IngressController, metav1.GetOptions{})
		if err != nil {
			return false
		}
		raw = cm.Annotations[lockmeta.HolderPodAnnotationKey]
		return strings.Contains(raw, `"holder":"b"`) && strings.Contains(raw, uidB)
	}))
	t.Logf("b's mark %s appeared %v after b's work started", raw, time.Since(b.lastStart()))
	le, err = election.NewLeaderElection(ns, "c", election.IngressController, "stable", c.Client, podOpts(t)...)
	cf := newInstance(t, "c", le, err)
	testutil.Eventually(t, 10*time.Second, testutil.Check("c to see b", func() bool { return cf.le.Status().Holder == "b" }))
	b.stop()
	reported := k.report("meshd-b", terminated(startedB))
	testutil.Eventually(t, 5*time.Second, testutil.Check("c to take over from b", cf.leads))
	if took := cf.lastStart().Sub(reported); took > 1100*time.Millisecond {
		t.Errorf("c started %v after the report of b's end; want under 1.1s", took)
	}
	if overlap(a, b) || overlap(b, cf) || overlap(a, cf) {
		t.Fatal("two of a, b and c ran their work at the same time")
	}
}
