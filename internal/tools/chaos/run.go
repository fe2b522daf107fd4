package chaos

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshd-io/meshd/internal/election/coordinated"
	"github.com/meshd-io/meshd/internal/election/session"
	"github.com/meshd-io/meshd/internal/errlist"
	"github.com/meshd-io/meshd/internal/lockmeta"
	"github.com/meshd-io/meshd/internal/testing/faultproxy"
	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/pkg/election"
	"github.com/meshd-io/meshd/pkg/election/elector"
	"github.com/meshd-io/meshd/pkg/resourcelock"
	"github.com/meshd-io/meshd/pkg/revisions"
)

// Config configures Run.
type Config struct {
	// Cluster is the API server the run plays with. Required. The run
	// restarts its apiserver and etcd, so nothing else should use it
	// meanwhile.
	Cluster *testcluster.Cluster
	// MeshdBinary is the meshd executable. Required.
	MeshdBinary string
	// Dir receives kubeconfigs, logs and ledgers. Required.
	Dir string

	// Seed fixes the sequence of faults and their parameters.
	Seed uint64
	// Duration bounds the time spent injecting faults; default 3m.
	Duration time.Duration
	// MaxFaults bounds their number; default 100.
	MaxFaults int
	// Instances is how many meshd processes run, 3 to 5; default 4. They
	// alternate between Revisions.
	Instances int
	// TTL is meshd's --ttl; default 4s.
	TTL time.Duration
	// Kinds are the faults to draw from; default all.
	Kinds []Kind
	// Revisions are the control-plane revisions; default stable, canary.
	// The first is the default revision at the start.
	Revisions []string
	// Slack is added to the liveness bound (see Bound); default 1s.
	Slack time.Duration
	// ElectionMode is meshd's --election-mode; empty means racing. A
	// coordinated mode needs a Cluster that serves LeaseCandidates.
	ElectionMode string
	// Sessions starts every instance with --sessions: meshd's own Lease
	// elections (status, revision) renew through one session Lease per
	// process. Racing mode only. It adds DeleteSession to the default
	// kinds.
	Sessions bool
	// Pods runs every instance in a Pod of its own, whose status the run
	// writes as the kubelet of its node would (running at each start, a
	// restart at each start after the first), with POD_NAME, POD_NAMESPACE,
	// POD_UID and CONTAINER_NAME set, so that meshd's Pod-aware failover
	// is on. It adds KillReportedLeader to the default kinds.
	Pods bool

	// Log receives a line per step; default none.
	Log io.Writer
}

func (c Config) withDefaults() Config {
	if c.Duration == 0 {
		c.Duration = 3 * time.Minute
	}
	if c.MaxFaults == 0 {
		c.MaxFaults = 100
	}
	if c.Instances == 0 {
		c.Instances = 4
	}
	if c.TTL == 0 {
		c.TTL = 4 * time.Second
	}
	if len(c.Kinds) == 0 {
		c.Kinds = DefaultKinds(c.Sessions)
		if c.Pods {
			c.Kinds = append(c.Kinds, PodKinds()...)
		}
	}
	if len(c.Revisions) == 0 {
		c.Revisions = []string{"stable", "canary"}
	}
	if c.Slack == 0 {
		c.Slack = time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Cluster == nil {
		errs = append(errs, errors.New("Cluster is required"))
	}
	if c.MeshdBinary == "" {
		errs = append(errs, errors.New("MeshdBinary is required"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("Dir is required"))
	}
	return errlist.Join(append(errs, c.CheckSettings())...)
}

// CheckSettings reports every invalid setting of c other than Cluster,
// MeshdBinary and Dir, after applying the defaults, so that a command can
// refuse bad flags before it starts a cluster.
func (c Config) CheckSettings() error {
	c = c.withDefaults()
	var errs []error
	if c.Instances < 3 || c.Instances > 5 {
		errs = append(errs, fmt.Errorf("Instances %d: want 3 to 5", c.Instances))
	}
	if c.TTL < 2*time.Second || c.TTL%time.Second != 0 {
		errs = append(errs, fmt.Errorf("TTL %v: want whole seconds, at least 2s", c.TTL))
	}
	if c.Duration < 0 || c.MaxFaults < 0 || c.Slack < 0 {
		errs = append(errs, errors.New("Duration, MaxFaults and Slack must not be negative"))
	}
	if c.Duration > time.Hour || c.MaxFaults > 1000 {
		errs = append(errs, errors.New("a run is bounded to an hour and 1000 faults"))
	}
	if len(c.Revisions) < 2 {
		errs = append(errs, errors.New("at least two revisions are needed"))
	}
	if c.Sessions && c.ElectionMode != "" && c.ElectionMode != "racing" {
		errs = append(errs, fmt.Errorf("Sessions apply to racing elections only, not election mode %s", c.ElectionMode))
	}
	for _, k := range SessionKinds() {
		if !c.Sessions && slices.Contains(c.Kinds, k) {
			errs = append(errs, fmt.Errorf("fault kind %s needs Sessions", k))
		}
	}
	for _, k := range PodKinds() {
		if !c.Pods && slices.Contains(c.Kinds, k) {
			errs = append(errs, fmt.Errorf("fault kind %s needs Pods", k))
		}
	}
	return errlist.Join(errs...)
}

// Timing returns the lease duration, renew deadline and retry period of ttl.
func Timing(ttl time.Duration) (lease, renewDeadline, retry time.Duration) {
	return elector.TimingFromTTL(ttl)
}

// Bound is the liveness bound: after a fault (after it heals, for the kinds
// that cut everyone off), every election has a leader running again within
// the lease (the longest a holder that vanished can block others), plus
// one jittered retry period (a follower whose watch broke polls that often),
// plus slack for requests, informers and starting the controllers.
func Bound(ttl, slack time.Duration) time.Duration {
	lease, _, retry := Timing(ttl)
	return lease + time.Duration(float64(retry)*(1+elector.JitterFactor)) + slack
}

// bound is the run's liveness bound. In a coordinated mode it is a lease
// longer (docs/coordinated.md): when the holder and the coordinator vanish
// together, the next coordinator takes over within a lease and then judges
// the holder's lease by its own observation, which starts when it does;
// candidates left without any coordinator take a vacant lock after the
// same time.
func (c Config) bound() time.Duration {
	b := Bound(c.TTL, c.Slack)
	if c.ElectionMode != "" && c.ElectionMode != "racing" {
		lease, _, _ := Timing(c.TTL)
		b += lease
	}
	return b
}

// FaultRecord is what happened when one fault was injected.
type FaultRecord struct {
	N     int
	Fault Fault
	// Target describes what the fault hit: an instance, a lock, the API server.
	Target string
	// Start is when it was injected, Heal when it ended (the same for
	// instantaneous faults), Ref when the liveness bound starts counting.
	Start, Heal, Ref Mono
	// Recovered is how long after Heal every instance ran and every election
	// again reported a leader on /debug/elections; negative when that did
	// not happen in time. (The ledgers, not this, decide liveness.)
	Recovered time.Duration
	// Err is set when the fault could not be injected as planned.
	Err error
}

// runner is one run in progress.
type runner struct {
	cfg       Config
	mesh      *mesh
	instances []*instance
	rng       *mrand.Rand // runtime choices (which instance), seeded too
	log       io.Writer

	mu      sync.Mutex
	crashes []string
}

// Run sets up the mesh, starts the instances, injects faults for
// cfg.Duration (or cfg.MaxFaults faults), stops everything and checks the
// results. The error is about the run itself (setup, the API server not
// coming back); a run that completes returns a Report, whose Passed tells
// whether meshd kept its promises.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	r := &runner{
		cfg: cfg,
		rng: mrand.New(mrand.NewPCG(cfg.Seed, ^cfg.Seed)),
		log: cfg.Log,
	}
	suffix := randomSuffix()
	r.mesh = &mesh{
		client:    cfg.Cluster.Client,
		namespace: "chaos-" + suffix,
		revisions: cfg.Revisions,
		locks:     daemonLocks(cfg.Revisions),
	}
	for i := 1; i <= 3; i++ {
		r.mesh.apps = append(r.mesh.apps, fmt.Sprintf("chaos-%s-app-%d", suffix, i))
	}
	// Deferred calls run last first: stop the processes, then delete the
	// namespaces they worked in.
	defer r.mesh.tearDown(context.Background())
	defer r.stopAll()
	if err := r.mesh.setUp(ctx); err != nil {
		return nil, fmt.Errorf("chaos: set up: %w", err)
	}
	if err := r.startInstances(); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	started := Now()
	r.logf("started %d instances in namespace %s; waiting for leaders", len(r.instances), r.mesh.namespace)
	if d := r.settle(ctx, started, time.Minute); d < 0 {
		return nil, fmt.Errorf("chaos: no leader for every election within a minute of starting:\n%s", r.tails())
	}

	lease, _, _ := Timing(cfg.TTL)
	plan := Plan(cfg.Seed, cfg.MaxFaults, cfg.Kinds, cfg.TTL, len(r.mesh.locks), cfg.Revisions)
	faultsFrom := Now()
	var records []FaultRecord
	for i, f := range plan {
		if ctx.Err() != nil || Now().Sub(faultsFrom) >= cfg.Duration {
			break
		}
		rec := r.inject(ctx, i+1, f)
		if rec.Err != nil {
			r.logf("#%d %v: %v", rec.N, f, rec.Err)
		}
		rec.Recovered = r.settle(ctx, rec.Heal, 3*lease+time.Minute)
		if f.Kind == DeleteLock {
			// The object meshd recreates lacks what the run seeded; add it
			// back, as whoever owned it would.
			if err := r.mesh.reseedLock(ctx, r.mesh.locks[f.Election], 3*lease); err != nil {
				rec.Err = errlist.Join(rec.Err, fmt.Errorf("re-seed the deleted lock: %w", err))
			}
		}
		r.logf("#%-3d %-50s %s; all led %s after it ended", rec.N, f, rec.Target, fmtRecovery(rec.Recovered))
		records = append(records, rec)
		if rec.Err != nil && (f.Kind == RestartAPIServer || f.Kind == RestartEtcd) {
			return nil, fmt.Errorf("chaos: #%d %s: %w\n%s", rec.N, f.Kind, rec.Err, cfg.Cluster.LogTails(20))
		}
		sleep(ctx, f.Pause)
	}
	faultsUntil := Now()
	r.logf("injected %d faults in %v; stopping the instances", len(records), faultsUntil.Sub(faultsFrom).Round(time.Second))
	r.settle(ctx, faultsUntil, 2*lease)
	unclean := r.stopGracefully()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	var files []LedgerFile
	for _, in := range r.instances {
		files = append(files, in.ledgerFiles()...)
	}
	ivs, err := ReadLedgers(Now(), files...)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	lost, err := r.mesh.checkData(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: check data: %w", err)
	}
	r.mu.Lock()
	crashes := append([]string(nil), r.crashes...)
	r.mu.Unlock()
	rep := analyse(analysisInput{
		cfg: cfg, locks: r.mesh.locks, instances: r.names(), intervals: ivs, faults: records,
		started: started, faultsFrom: faultsFrom, faultsUntil: faultsUntil,
		lost: lost, crashes: crashes, unclean: unclean,
	})
	return rep, nil
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func fmtRecovery(d time.Duration) string {
	if d < 0 {
		return "NEVER"
	}
	return d.Round(10 * time.Millisecond).String()
}

func (r *runner) names() []string {
	var out []string
	for _, in := range r.instances {
		out = append(out, in.name+" ("+in.revision+")")
	}
	return out
}

// startInstances creates a proxy and kubeconfig per instance and starts
// them.
func (r *runner) startInstances() error {
	u, err := url.Parse(r.cfg.Cluster.Host())
	if err != nil {
		return err
	}
	revs := r.cfg.Revisions
	for i := 0; i < r.cfg.Instances; i++ {
		rev := revs[i%len(revs)]
		name := fmt.Sprintf("%s-%d", rev, i/len(revs)+1)
		p, err := faultproxy.New(u.Host)
		if err != nil {
			return err
		}
		kubeconfig := filepath.Join(r.cfg.Dir, name+".kubeconfig")
		if err := writeKubeconfig(kubeconfig, r.cfg.Cluster.Config, "https://"+p.Addr()); err != nil {
			p.Close()
			return err
		}
		in := &instance{
			name: name, revision: rev, proxy: p, kubeconfig: kubeconfig,
			binary: r.cfg.MeshdBinary, dir: r.cfg.Dir,
			args: r.instanceArgs(),
		}
		in.onExit = r.exited
		if r.cfg.Pods {
			if in.pod, err = newKubeletPod(context.Background(), r.cfg.Cluster.Client, r.mesh.namespace, name); err != nil {
				p.Close()
				return err
			}
		}
		r.instances = append(r.instances, in)
		if err := in.start(); err != nil {
			return err
		}
	}
	return nil
}

// exited is told about every exit; one nobody asked for is a crash.
func (r *runner) exited(in *instance, incarnation int, expected bool, err error) {
	if expected {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.crashes = append(r.crashes, fmt.Sprintf("%s exited on its own (%v):\n%s", in.holder(incarnation), err, in.logTail(incarnation, 2000)))
}

// stopAll kills every instance and closes every proxy.
func (r *runner) stopAll() {
	for _, in := range r.instances {
		in.kill()
		in.proxy.Close()
	}
}

// stopGracefully SIGTERMs every instance at once, as a rollout would, and
// returns those that did not exit cleanly.
func (r *runner) stopGracefully() []string {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		unclean []string
	)
	for _, in := range r.instances {
		if !in.running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := in.signal(syscall.SIGTERM, 20*time.Second)
			if err == nil {
				err = in.exitErr()
			}
			if err != nil {
				mu.Lock()
				unclean = append(unclean, fmt.Sprintf("%s: %v", in.name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return unclean
}

// settle waits until every instance runs and every election has a leader
// by /debug/elections, for at most timeout. It returns how long after ref
// that was, or -1 on timeout. An instance found dead has crashed (faults
// start their victims again before settle): it is reported by exited and
// started again, so that the run goes on with all of them.
func (r *runner) settle(ctx context.Context, ref Mono, timeout time.Duration) time.Duration {
	deadline := time.Now().Add(timeout)
	for _, in := range r.instances {
		if !in.running() {
			r.logf("%s is not running; starting it again", in.name)
			if err := in.start(); err != nil {
				r.logf("start %s: %v", in.name, err)
			}
		}
	}
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if r.allLed(ctx) {
			return max(Now().Sub(ref), 0)
		}
		sleep(ctx, 50*time.Millisecond)
	}
	return -1
}

// allLed reports whether every instance runs and, for every lock, one of
// them says it leads.
func (r *runner) allLed(ctx context.Context) bool {
	led := map[string]bool{}
	for _, in := range r.instances {
		if !in.running() {
			return false
		}
		sts, err := in.statuses(ctx)
		if err != nil {
			continue
		}
		for _, s := range sts {
			if s.Leader {
				led[s.Name] = true
			}
		}
	}
	for _, l := range r.mesh.locks {
		if !led[l.name] {
			return false
		}
	}
	return true
}

// instanceArgs are the meshd run flags every instance gets besides its own.
func (r *runner) instanceArgs() []string {
	args := []string{"--namespace", r.mesh.namespace, "--ttl", r.cfg.TTL.String(), "--log-level", "info"}
	if r.cfg.ElectionMode != "" {
		args = append(args, "--election-mode", r.cfg.ElectionMode)
	}
	if r.cfg.Sessions {
		args = append(args, "--sessions")
	}
	return args
}

// holds reports whether the record's holder is instance in: its identity,
// or its LeaseCandidate's name in a coordinated election.
func holds(holder string, in *instance, l lockRef) bool {
	return holder == in.name || holder == coordinated.CandidateName(l.name, in.name)
}

// leader returns the running instance holding lock l, or a random one when
// the holder is not a running instance (a bogus holder, none).
func (r *runner) leader(ctx context.Context, l lockRef) (*instance, string) {
	rec, err := r.mesh.record(ctx, l)
	if err == nil {
		for _, in := range r.instances {
			if holds(rec.HolderIdentity, in, l) && in.running() {
				return in, in.name + " (holds " + l.name + ")"
			}
		}
	}
	var running []*instance
	for _, in := range r.instances {
		if in.running() {
			running = append(running, in)
		}
	}
	if len(running) == 0 {
		return nil, "nobody"
	}
	in := running[r.rng.IntN(len(running))]
	return in, in.name + " (no live holder of " + l.name + ")"
}

// inject carries out one fault and returns when it has healed (and, for a
// killed or stopped instance, when it has been started again).
func (r *runner) inject(ctx context.Context, n int, f Fault) FaultRecord {
	rec := FaultRecord{N: n, Fault: f}
	lock := r.mesh.locks[f.Election]
	instant := func() { rec.Start = Now(); rec.Heal, rec.Ref = rec.Start, rec.Start }
	switch f.Kind {
	case KillReportedLeader:
		victim, desc := r.leader(ctx, lock)
		rec.Target = desc
		if victim == nil || victim.pod == nil {
			instant()
			rec.Err = errors.New("no instance in a Pod to kill")
			break
		}
		killed := time.Now()
		sent, err := victim.signal(syscall.SIGKILL, 10*time.Second)
		rec.Start, rec.Ref, rec.Heal = sent, sent, Now()
		rec.Err = err
		sleep(ctx, time.Until(killed.Add(kubeletReportDelay)))
		if err := victim.pod.reportTerminated(ctx, killed); err != nil {
			rec.Err = errlist.Join(rec.Err, err)
		}
		sleep(ctx, f.RestartAfter)
		if err := victim.start(); err != nil {
			rec.Err = errlist.Join(rec.Err, err)
		}
	case KillLeader, TermLeader:
		victim, desc := r.leader(ctx, lock)
		rec.Target = desc
		if victim == nil {
			instant()
			rec.Err = errors.New("no instance to stop")
			break
		}
		sig, wait := syscall.SIGKILL, 10*time.Second
		if f.Kind == TermLeader {
			sig, wait = syscall.SIGTERM, 20*time.Second
		}
		sent, err := victim.signal(sig, wait)
		rec.Start, rec.Ref, rec.Heal = sent, sent, Now()
		rec.Err = err
		if f.Kind == TermLeader && err == nil {
			if xerr := victim.exitErr(); xerr != nil {
				rec.Err = fmt.Errorf("exit after SIGTERM: %w", xerr)
			}
		}
		sleep(ctx, f.RestartAfter)
		if err := victim.start(); err != nil {
			rec.Err = errlist.Join(rec.Err, err)
		}
	case RestartAPIServer, RestartEtcd:
		rec.Target = "the API server"
		restart := r.cfg.Cluster.RestartAPIServer
		if f.Kind == RestartEtcd {
			rec.Target, restart = "etcd", r.cfg.Cluster.RestartEtcd
		}
		rec.Start = Now()
		rec.Err = restart()
		rec.Heal = Now()
		rec.Ref = rec.Heal
	case PartitionLeader, SlowLeader, ResetLeader:
		victim, desc := r.leader(ctx, lock)
		rec.Target = desc
		if victim == nil {
			instant()
			rec.Err = errors.New("no instance to hit")
			break
		}
		rec.Start = Now()
		rec.Ref = rec.Start
		switch f.Kind {
		case PartitionLeader:
			victim.proxy.Partition()
			sleep(ctx, f.Hold)
			victim.proxy.Heal()
		case SlowLeader:
			victim.proxy.SetLatency(f.Latency)
			sleep(ctx, f.Hold)
			victim.proxy.SetLatency(0)
		case ResetLeader:
			rec.Target += fmt.Sprintf(", %d connection(s)", victim.proxy.Reset())
		}
		rec.Heal = Now()
		if f.Kind.healReferenced() {
			rec.Ref = rec.Heal
		}
	case PartitionAll:
		rec.Target = "every instance"
		rec.Start = Now()
		for _, in := range r.instances {
			in.proxy.Partition()
		}
		sleep(ctx, f.Hold)
		for _, in := range r.instances {
			in.proxy.Heal()
		}
		rec.Heal = Now()
		rec.Ref = rec.Heal
	case FlipDefault:
		current, err := r.currentDefault(ctx)
		if err != nil {
			instant()
			rec.Err = err
			break
		}
		to := f.Revision
		if to == current {
			choices := append(append([]string(nil), r.cfg.Revisions...), "")
			for i, c := range choices {
				if c == to {
					to = choices[(i+1)%len(choices)]
					break
				}
			}
		}
		rec.Target = fmt.Sprintf("default %q -> %q", current, to)
		instant()
		rec.Err = r.mesh.setDefault(ctx, to)
	case DeleteLock:
		rec.Target = lock.name
		instant()
		rec.Err = r.mesh.deleteLock(ctx, lock)
	case DeleteSession:
		if lock.kind == election.ConfigMapLock {
			// istiod's election never uses sessions: hit the status
			// election's leader instead.
			lock = r.mesh.locks[1]
		}
		victim, desc := r.leader(ctx, lock)
		if victim == nil {
			instant()
			rec.Target, rec.Err = desc, errors.New("no instance whose session to delete")
			break
		}
		lease, _, _ := Timing(r.cfg.TTL)
		name := session.LeaseName(victim.name, lease)
		rec.Target = name + " of " + desc
		instant()
		if rec.Err = r.mesh.deleteLease(ctx, name); rec.Err == nil {
			// The session must create its Lease again at its next
			// heartbeat; a session that stays gone is a failure.
			rec.Err = r.mesh.awaitLease(ctx, name, 3*lease)
		}
	case BogusHolder:
		holder := fmt.Sprintf("intruder-%d", n)
		rec.Target = lock.name + " -> " + holder
		var extra map[string]string
		if r.cfg.Sessions && lock.kind == election.LeaseLock && n%2 == 0 {
			// Every other one claims a session nobody has seen, as a
			// session-aware holder would; the others write as a holder that
			// does not know sessions, after which the candidates that saw
			// it renew their records themselves in that election for the
			// rest of their process.
			lease, _, _ := Timing(r.cfg.TTL)
			mark, err := json.Marshal(lockmeta.SessionMark{Holder: holder, Session: session.Ref(session.LeaseName(holder, lease), "bogus")})
			if err != nil {
				instant()
				rec.Err = err
				break
			}
			extra = map[string]string{lockmeta.SessionAnnotationKey: string(mark)}
			rec.Target += " (with a session mark)"
		}
		instant()
		rec.Err = r.mesh.rewrite(ctx, lock, func(rec *resourcelock.Record) {
			now := time.Now()
			*rec = resourcelock.Record{
				HolderIdentity: holder, HolderKey: f.Key,
				LeaseDurationSeconds: int(r.cfg.TTL / time.Second),
				LeaderTransitions:    rec.LeaderTransitions + 1,
			}
			rec.AcquireTime.Time, rec.RenewTime.Time = now, now
		}, extra)
	case CorruptRecord:
		lock = r.mesh.locks[0] // the ConfigMap lock: a Lease has no bytes to break
		rec.Target = lock.name
		instant()
		rec.Err = r.mesh.corrupt(ctx, lock, f.Garbage)
	default:
		instant()
		rec.Err = fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	return rec
}

func (r *runner) currentDefault(ctx context.Context) (string, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	wh, err := r.mesh.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx,
		revisions.DefaultWebhookName(r.mesh.namespace), metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return wh.Labels[revisions.DefaultRevisionLabel], nil
}

// tails returns the end of every instance's current log.
func (r *runner) tails() string {
	var b strings.Builder
	for _, in := range r.instances {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", in.name, in.logTail(0, 1500))
	}
	return b.String()
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// randomSuffix names the run's namespaces; it does not touch the seeded
// sequence.
func randomSuffix() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 6)
	for i := range b {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[n.Int64()]
	}
	return string(b)
}
