package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/pkg/election"
)

// KubeletReportDelay is how long after the kill the benchmark writes the
// holder's container terminated, as the kubelet of its node would report
// it (the runtime's exit event, then the kubelet's status sync).
const KubeletReportDelay = time.Second

// kubeletContainer is the container of every replica's Pod.
const kubeletContainer = "meshd"

// KubeletResult is the failover after a crash reported by the kubelet, for
// one implementation at one ttl: each replica is a process in a Pod of its
// own, the holder's process is killed with SIGKILL, and KubeletReportDelay
// later its container's end is written to its Pod's status.
type KubeletResult struct {
	Impl Impl
	TTL  time.Duration
	// Latency is from the SIGKILL to a successor's run function start.
	Latency Durations
	// Overlap is between the run functions of every replica of every
	// trial; the killed holder's work ends when its process was reaped.
	Overlap Overlap
	Errors  []string
}

// KubeletSpawn starts the replica processes of the kubelet failover.
type KubeletSpawn struct {
	// Executable is the benchmark's own binary; Args is the command line
	// that makes it a Pod replica (RunPodReplica) with the options given.
	Executable string
	Args       func(PodReplicaOptions) []string
}

// PodReplicaOptions configure one replica process of the kubelet failover:
// one election, run in the Pod Pod/UID, container Container.
type PodReplicaOptions struct {
	Impl       Impl
	TTL        time.Duration
	Namespace  string
	Lock       string
	Identity   string
	Kubeconfig string
	Pod        string
	UID        string
	// ProcessStart is a reading of the replica's clock taken first thing
	// in its main.
	ProcessStart time.Time
}

// Pod replica protocol: one JSON PodReplicaEvent per line on stdout.
// "hello" carries ProcessStart; "leader" each change of the holder the
// replica observes; "started" and "stopped" its run function's start and
// stop, timed on CLOCK_MONOTONIC, which every process of the machine
// shares. The replica stops (gracefully) at the end of its input.
const (
	podHello   = "hello"
	podLeader  = "leader"
	podStarted = "started"
	podStopped = "stopped"
	podError   = "error"
)

// PodReplicaEvent is one line of a Pod replica's output.
type PodReplicaEvent struct {
	Event string `json:"event"`
	// Mono is CLOCK_MONOTONIC in nanoseconds (started, stopped).
	Mono int64 `json:"mono,omitempty"`
	// ProcessStart (hello) is the replica's ProcessStart.
	ProcessStart time.Time `json:"processStart,omitzero"`
	Holder       string    `json:"holder,omitempty"`
	Error        string    `json:"error,omitempty"`
}

// mono reads CLOCK_MONOTONIC, in nanoseconds.
func mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return time.Now().UnixNano()
	}
	return ts.Nano()
}

// RunPodReplica runs one replica of the kubelet failover; see the protocol
// above. A meshd replica publishes its Pod (WithPodIdentity) and follows
// the holder's (WithPodFailover).
func RunPodReplica(ctx context.Context, o PodReplicaOptions, in io.Reader, out io.Writer) error {
	quietKlog()
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	emit := func(e PodReplicaEvent) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e)
	}
	err := runPodReplica(ctx, o, in, emit)
	if err != nil {
		emit(PodReplicaEvent{Event: podError, Error: err.Error()})
	}
	return err
}

func runPodReplica(ctx context.Context, o PodReplicaOptions, in io.Reader, emit func(PodReplicaEvent)) error {
	emit(PodReplicaEvent{Event: podHello, ProcessStart: o.ProcessStart})
	restCfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return err
	}
	restCfg.QPS = -1
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	spec := Spec{
		Impl: o.Impl, Client: client, Namespace: o.Namespace, Lock: o.Lock, Identity: o.Identity, TTL: o.TTL,
		Work: func(ctx context.Context) {
			emit(PodReplicaEvent{Event: podStarted, Mono: mono()})
			<-ctx.Done()
			emit(PodReplicaEvent{Event: podStopped, Mono: mono()})
		},
	}
	if o.Impl != ClientGo {
		spec.Pod = &election.PodIdentity{Namespace: o.Namespace, Pod: o.Pod, UID: o.UID, Container: kubeletContainer,
			ProcessStart: o.ProcessStart}
	}
	cand, err := NewCandidate(spec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The benchmark closes the input to stop the replica.
		defer cancel()
		_, _ = io.Copy(io.Discard, in)
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cand.Run(ctx)
	}()
	last := ""
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-tick.C:
			if l := cand.Leader(); l != last {
				last = l
				emit(PodReplicaEvent{Event: podLeader, Holder: l})
			}
		}
	}
}

// podProc is a running Pod replica.
type podProc struct {
	id     string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *limitedWriter
	hello  chan time.Time
	done   chan struct{}

	mu     sync.Mutex
	leader string
	starts []int64
	stops  []int64
	failed string
}

func startPodReplica(spawn KubeletSpawn, o PodReplicaOptions) (*podProc, error) {
	cmd := exec.Command(spawn.Executable, spawn.Args(o)...)
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &podProc{id: o.Identity, cmd: cmd, stdin: stdin, stderr: &limitedWriter{max: 64 << 10},
		hello: make(chan time.Time, 1), done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			var e PodReplicaEvent
			if err := json.Unmarshal(s.Bytes(), &e); err != nil {
				continue // a line cut short by SIGKILL
			}
			p.note(e)
		}
	}()
	go func() {
		defer close(p.done)
		<-read
		_ = cmd.Wait()
	}()
	return p, nil
}

func (p *podProc) note(e PodReplicaEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Event {
	case podHello:
		select {
		case p.hello <- e.ProcessStart:
		default: // said once; a second hello changes nothing
		}
	case podLeader:
		p.leader = e.Holder
	case podStarted:
		p.starts = append(p.starts, e.Mono)
	case podStopped:
		p.stops = append(p.stops, e.Mono)
	case podError:
		p.failed = e.Error
	}
}

// state is the holder p last observed, whether its work runs, and the
// start of its latest term.
func (p *podProc) state() (leader string, leading bool, lastStart int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.starts); n > 0 {
		lastStart = p.starts[n-1]
	}
	return p.leader, len(p.starts) > len(p.stops), lastStart
}

// intervals are p's terms; an open one ends at end.
func (p *podProc) intervals(end int64) [][2]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([][2]int64, len(p.starts))
	for i, s := range p.starts {
		out[i] = [2]int64{s, end}
		if i < len(p.stops) {
			out[i][1] = p.stops[i]
		}
	}
	return out
}

// awaitHello returns the replica's ProcessStart.
func (p *podProc) awaitHello(ctx context.Context, timeout time.Duration) (time.Time, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-t.C:
		return time.Time{}, fmt.Errorf("replica %s: no hello within %v", p.id, timeout)
	case <-p.done:
		return time.Time{}, fmt.Errorf("replica %s exited: %s", p.id, p.stderr.String())
	case at := <-p.hello:
		return at, nil
	}
}

// stop closes the replica's input and kills it if it has not exited
// within a few seconds.
func (p *podProc) stop() { closeOrKill(p.cmd, p.stdin, p.done) }

// RunKubeletFailover measures the failover after a crash reported by the
// kubelet for impl at cfg.TTL, over cfg.Trials trials.
func RunKubeletFailover(ctx context.Context, env *Env, cfg Config, impl Impl, spawn KubeletSpawn) KubeletResult {
	res := KubeletResult{Impl: impl, TTL: cfg.TTL}
	ns, err := env.NewNamespace(ctx, "kubelet")
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	for i := 0; i < cfg.Trials && ctx.Err() == nil; i++ {
		lock := fmt.Sprintf("%s-%d", impl, i)
		lat, ov, err := kubeletTrial(ctx, env, cfg, spawn, PodReplicaOptions{Impl: impl, TTL: cfg.TTL, Namespace: ns, Lock: lock,
			Kubeconfig: env.Kubeconfig})
		res.Overlap.Pairs += ov.Pairs
		res.Overlap.Total += ov.Total
		res.Overlap.Max = max(res.Overlap.Max, ov.Max)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("trial %d: %v", i, err))
			cfg.logf("  kubelet %s ttl %v trial %d: %v", impl, cfg.TTL, i, err)
			continue
		}
		res.Latency = append(res.Latency, lat)
		cfg.logf("  kubelet %s ttl %v trial %d: %s from the kill", impl, cfg.TTL, i, fmtDur(lat))
	}
	return res
}

// kubeletTrial runs three replicas in three Pods, kills the holder's
// process, reports its container terminated KubeletReportDelay later and
// returns the time from the kill to the successor's start, with the
// overlap of every replica's work.
func kubeletTrial(ctx context.Context, env *Env, cfg Config, spawn KubeletSpawn, base PodReplicaOptions) (time.Duration, Overlap, error) {
	pods := env.Client.CoreV1().Pods(base.Namespace)
	var procs []*podProc
	killedAt := map[*podProc]int64{}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	reported := make([]*corev1.Pod, 3)
	for c := range 3 {
		o := base
		o.Identity = fmt.Sprintf("%s-c%d", base.Lock, c)
		o.Pod = o.Identity
		created, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: o.Pod},
			Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: kubeletContainer, Image: "meshd:bench"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return 0, Overlap{}, err
		}
		o.UID = string(created.UID)
		p, err := startPodReplica(spawn, o)
		if err != nil {
			return 0, Overlap{}, err
		}
		procs = append(procs, p)
		alive, err := p.awaitHello(ctx, 30*time.Second)
		if err != nil {
			return 0, Overlap{}, err
		}
		// The kubelet reports the container running since the runtime
		// started it, a moment before the process's first clock reading,
		// in whole seconds.
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: kubeletContainer, Image: "meshd:bench", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(alive.Truncate(time.Second))}},
		}}}
		if reported[c], err = pods.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return 0, Overlap{}, err
		}
	}
	overlap := func() Overlap { return procOverlap(procs, killedAt) }
	holder := -1
	settled := func() bool {
		leaders, leading := map[string]bool{}, -1
		for i, p := range procs {
			l, runs, _ := p.state()
			leaders[l] = true
			if runs {
				if leading >= 0 {
					return false
				}
				leading = i
			}
		}
		holder = leading
		return len(leaders) == 1 && !leaders[""] && leading >= 0 && procs[leading].id == firstKey(leaders)
	}
	if err := waitUntil(ctx, cfg.settleTimeout(), "a leader seen by all", settled); err != nil {
		return 0, overlap(), err
	}
	old := procs[holder]
	if base.Impl != ClientGo {
		if err := waitUntil(ctx, 2*cfg.TTL, "the holder's Pod mark on its Lease", func() bool {
			return env.marked(ctx, base.Namespace, base.Lock, old.id)
		}); err != nil {
			return 0, overlap(), err
		}
	}
	// Let followers reach their steady state, and kill at a random phase
	// of the holder's renew cycle.
	if err := sleep(ctx, cfg.steadyPause()); err != nil {
		return 0, overlap(), err
	}
	if l, runs, _ := old.state(); !runs || l != old.id {
		return 0, overlap(), fmt.Errorf("leadership changed while settling")
	}
	t0, wall := mono(), time.Now()
	if err := old.cmd.Process.Kill(); err != nil {
		return 0, overlap(), err
	}
	<-old.done
	killedAt[old] = mono()
	if err := sleep(ctx, time.Until(wall.Add(KubeletReportDelay))); err != nil {
		return 0, overlap(), err
	}
	pod := reported[holder]
	started := pod.Status.ContainerStatuses[0].State.Running.StartedAt
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses[0].Ready = false
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 137, Reason: "Error", StartedAt: started, FinishedAt: metav1.NewTime(wall)}}
	if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return 0, overlap(), fmt.Errorf("report the holder's end: %w", err)
	}
	var next int64
	if err := waitUntil(ctx, cfg.takeoverTimeout(), "a successor's start", func() bool {
		for _, p := range procs {
			if _, runs, at := p.state(); p != old && runs && at > t0 {
				next = at
				return true
			}
		}
		return false
	}); err != nil {
		return 0, overlap(), err
	}
	return time.Duration(next - t0), overlap(), nil
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// marked reports whether the Lease lock carries a Pod mark of holder.
func (e *Env) marked(ctx context.Context, ns, lock, holder string) bool {
	l, err := e.Client.CoordinationV1().Leases(ns).Get(ctx, lock, metav1.GetOptions{})
	if err != nil {
		return false
	}
	var mark lockmeta.HolderPod
	raw, ok := l.Annotations[lockmeta.HolderPodAnnotationKey]
	return ok && json.Unmarshal([]byte(raw), &mark) == nil && mark.Complete() && mark.Holder == holder
}

// procOverlap is the overlap of every pair of terms of the replicas; a
// killed replica's open term ends when its process was reaped, a running
// one's now.
func procOverlap(procs []*podProc, killedAt map[*podProc]int64) Overlap {
	now := mono()
	var ivs [][2]int64
	for _, p := range procs {
		end, ok := killedAt[p]
		if !ok {
			end = now
		}
		ivs = append(ivs, p.intervals(end)...)
	}
	sort.Slice(ivs, func(i, j int) bool { return ivs[i][0] < ivs[j][0] })
	var o Overlap
	for i := range ivs {
		for j := i + 1; j < len(ivs); j++ {
			if d := min(ivs[i][1], ivs[j][1]) - ivs[j][0]; d > 0 {
				o.Pairs++
				o.Total += time.Duration(d)
				o.Max = max(o.Max, time.Duration(d))
			}
		}
	}
	return o
}
