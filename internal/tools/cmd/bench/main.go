// Command bench compares meshd's leader election with client-go's elector
// and with meshd's polling mode (istiod's behaviour) on a real
// kube-apiserver and etcd started on 127.0.0.1, and writes the report to
// -out (docs/benchmarks.md via "make bench") and stdout. Progress goes to
// stderr.
//
//	go run ./internal/tools/cmd/bench -out docs/benchmarks.md
//	go run ./internal/tools/cmd/bench -quick             # a short development run
//	go run ./internal/tools/cmd/bench -sections scale -scale-cells 100x3,1000x3 -impls meshd,client-go
//	go run ./internal/tools/cmd/bench -quick -sections handover -impls meshd -trace-handover  # where a handover's time goes
//	go run ./internal/tools/cmd/bench -sections kubelet   # failover after a crash reported by the kubelet, alone
//
// The etcd and kube-apiserver binaries come from "make kube-bins"; set
// KUBE_BIN_DIR=$PWD/.cache/kube/bin when not running through make. With
// -replica (-pod-replica) the program is one replica process of the scale
// benchmark (of the kubelet failover), started by the benchmark itself.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/meshd-io/meshd/internal/tools/bench"
)

type options struct {
	out            string
	ttl            time.Duration
	trials         int
	quick          bool
	sections       string
	requestsWindow time.Duration
	longTTL        time.Duration
	longTrials     int
	scaleTTL       time.Duration
	scaleWindow    time.Duration
	scaleCells     string
	scaleSkip      string
	timeout        time.Duration
	impls          string
	replicaLogs    string
	replicaHeap    string
	traceHandover  bool
	kubeletTTLs    string

	// processStart is read first thing in main: a Pod replica's
	// ProcessStart.
	processStart time.Time
	podReplica   bench.PodReplicaOptions
	isPodChild   bool

	replica bench.ReplicaOptions
	isChild bool
	impl    string
}

var allSections = []string{"handover", "steal", "failover", "kubelet", "requests", "long-ttl", "coordinated", "scale"}

func main() {
	o := options{processStart: time.Now()}
	flag.StringVar(&o.out, "out", "", "write the Markdown report to this file too (make bench: docs/benchmarks.md)")
	flag.DurationVar(&o.ttl, "ttl", 4*time.Second, "ttl (lease duration) of every implementation in the latency and request scenarios")
	flag.IntVar(&o.trials, "trials", 10, "trials per latency and implementation")
	flag.BoolVar(&o.quick, "quick", false, "a short development run: 3 trials, a small scale matrix, short windows")
	flag.StringVar(&o.sections, "sections", strings.Join(allSections, ","), "sections to run")
	flag.DurationVar(&o.requestsWindow, "requests-window", 0, "steady-state window of the request scenario (default 6 x ttl)")
	flag.DurationVar(&o.longTTL, "long-ttl", 30*time.Second, "second ttl at which handover and steal are measured again (section long-ttl)")
	flag.IntVar(&o.longTrials, "long-trials", 5, "trials per implementation at -long-ttl")
	flag.DurationVar(&o.scaleTTL, "scale-ttl", 30*time.Second, "ttl of the scale section")
	flag.DurationVar(&o.scaleWindow, "scale-window", 0, "steady-state window of each scale cell (default 3 retry periods of the scale ttl)")
	flag.StringVar(&o.scaleCells, "scale-cells", bench.DefaultScaleCells, "cells of the scale section, comma-separated <elections per process>x<replica processes>")
	flag.StringVar(&o.scaleSkip, "scale-skip", bench.DefaultScaleSkip, "implementations left out of scale cells, comma-separated <implementation>@<elections>x<replicas>")
	flag.StringVar(&o.impls, "impls", strings.Join(implNames(bench.Impls), ","),
		"implementations to compare; "+strings.Join(implNames(bench.ScaleOnly), ",")+" runs in the scale section only")
	flag.BoolVar(&o.traceHandover, "trace-handover", false, "print to stderr a timeline of every meshd handover trial (requests, watch deliveries, elector log, run functions), and the medians of its legs: meshd's own share apart from the API server's")
	flag.StringVar(&o.kubeletTTLs, "kubelet-ttls", "4s,30s", "ttls of the kubelet section (failover after a crash reported by the kubelet), comma-separated")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Minute, "give up after this long")
	// Replica mode, used by the benchmark itself.
	flag.BoolVar(&o.isChild, "replica", false, "internal: run as one replica process of the scale benchmark")
	flag.StringVar(&o.impl, "impl", "", "internal (replica): implementation")
	flag.IntVar(&o.replica.Elections, "elections", 0, "internal (replica): number of elections")
	flag.StringVar(&o.replica.Namespace, "namespace", "", "internal (replica): namespace of the elections")
	flag.StringVar(&o.replica.Identity, "identity", "", "internal (replica): holder identity")
	flag.StringVar(&o.replica.Kubeconfig, "kubeconfig", "", "internal (replica): kubeconfig of the API server")
	flag.StringVar(&o.replica.LogFile, "log-file", "", "internal (replica): file for meshd's elector logs")
	flag.StringVar(&o.replica.RequestLog, "request-log", "", "internal (replica): file listing every API request sent")
	flag.StringVar(&o.replica.HeapProfile, "heap-profile", "", "internal (replica): file for a heap profile taken at the end of the window")
	flag.BoolVar(&o.isPodChild, "pod-replica", false, "internal: run as one replica process of the kubelet failover")
	flag.StringVar(&o.podReplica.Lock, "lock", "", "internal (pod replica): name of the Lease")
	flag.StringVar(&o.podReplica.Pod, "pod", "", "internal (pod replica): name of the replica's Pod")
	flag.StringVar(&o.podReplica.UID, "pod-uid", "", "internal (pod replica): UID of the replica's Pod")
	flag.StringVar(&o.replicaLogs, "replica-logs", "", "directory for the elector logs and request logs of every scale replica (for diagnosis)")
	flag.StringVar(&o.replicaHeap, "replica-heap-profiles", "", "directory for a heap profile of every scale replica, taken at the end of its window (for diagnosis)")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments: %v", flag.Args()))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case o.isPodChild:
		err = runPodReplica(ctx, o)
	case o.isChild:
		err = runReplica(ctx, o)
	default:
		err = run(ctx, o)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "bench: %v\n", err)
	os.Exit(1)
}

func runReplica(ctx context.Context, o options) error {
	impl, err := bench.ParseImpl(o.impl)
	if err != nil {
		return err
	}
	o.replica.Impl = impl
	o.replica.TTL = o.ttl
	return bench.RunReplica(ctx, o.replica, os.Stdin, os.Stdout)
}

func runPodReplica(ctx context.Context, o options) error {
	impl, err := bench.ParseImpl(o.impl)
	if err != nil {
		return err
	}
	r := o.podReplica
	r.Impl, r.TTL, r.ProcessStart = impl, o.ttl, o.processStart
	r.Namespace, r.Identity, r.Kubeconfig = o.replica.Namespace, o.replica.Identity, o.replica.Kubeconfig
	return bench.RunPodReplica(ctx, r, os.Stdin, os.Stdout)
}

// podReplicaArgs is the command line of a Pod replica process.
func podReplicaArgs(r bench.PodReplicaOptions) []string {
	return []string{"-pod-replica", "-impl", string(r.Impl), "-ttl", r.TTL.String(), "-namespace", r.Namespace,
		"-identity", r.Identity, "-kubeconfig", r.Kubeconfig, "-lock", r.Lock, "-pod", r.Pod, "-pod-uid", r.UID}
}

// replicaArgs is the command line of a replica process.
func replicaArgs(r bench.ReplicaOptions) []string {
	args := []string{"-replica", "-impl", string(r.Impl), "-elections", strconv.Itoa(r.Elections),
		"-ttl", r.TTL.String(), "-namespace", r.Namespace, "-identity", r.Identity, "-kubeconfig", r.Kubeconfig}
	if r.LogFile != "" {
		args = append(args, "-log-file", r.LogFile)
	}
	if r.RequestLog != "" {
		args = append(args, "-request-log", r.RequestLog)
	}
	if r.HeapProfile != "" {
		args = append(args, "-heap-profile", r.HeapProfile)
	}
	return args
}

func run(ctx context.Context, o options) error {
	if o.quick {
		setDefault("trials", &o.trials, 3)
		setDefault("scale-cells", &o.scaleCells, "1x3,10x3,100x3,10x1")
		setDefault("scale-ttl", &o.scaleTTL, 8*time.Second)
		setDefault("long-ttl", &o.longTTL, 8*time.Second)
		setDefault("long-trials", &o.longTrials, 2)
		setDefault("requests-window", &o.requestsWindow, 3*o.ttl)
	}
	if o.requestsWindow <= 0 {
		o.requestsWindow = 6 * o.ttl
	}
	if o.scaleWindow <= 0 {
		// Whole retry periods: each leader renews the same number of times
		// whatever the phase.
		o.scaleWindow = 3 * o.scaleTTL / 4
	}
	sections, err := parseSections(o.sections)
	if err != nil {
		return err
	}
	cells, err := bench.ParseCells(o.scaleCells)
	if err != nil {
		return fmt.Errorf("-scale-cells: %w", err)
	}
	skip, err := bench.ParseSkip(o.scaleSkip)
	if err != nil {
		return fmt.Errorf("-scale-skip: %w", err)
	}
	scaleImpls, err := parseImpls(o.impls)
	if err != nil {
		return fmt.Errorf("-impls: %w", err)
	}
	// The latency and request sections compare the shipped defaults.
	var impls []bench.Impl
	for _, impl := range scaleImpls {
		if !slices.Contains(bench.ScaleOnly, impl) {
			impls = append(impls, impl)
		}
	}
	cfg := bench.Config{TTL: o.ttl, Trials: o.trials, Logf: logf}
	if o.traceHandover {
		cfg.Trace = os.Stderr
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	long := bench.Config{TTL: o.longTTL, Trials: o.longTrials, Logf: logf, Trace: cfg.Trace}
	if err := long.Validate(); err != nil && sections["long-ttl"] {
		return fmt.Errorf("-long-ttl, -long-trials: %w", err)
	}
	kubeletTTLs, err := parseTTLs(o.kubeletTTLs)
	if err != nil && sections["kubelet"] {
		return fmt.Errorf("-kubelet-ttls: %w", err)
	}
	if o.scaleTTL < 2*time.Second {
		return fmt.Errorf("-scale-ttl %v: must be at least 2s", o.scaleTTL)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	began := time.Now()
	logf("starting etcd and kube-apiserver on 127.0.0.1")
	env, err := bench.StartEnv()
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	}()
	res := &bench.Results{
		Machine: env.DescribeMachine(),
		Command: command(),
		Quick:   o.quick,
		Config:  cfg,
	}
	logf("kube-apiserver %s ready after %v", res.Machine.APIServer, time.Since(began).Round(time.Millisecond))

	if sections["handover"] {
		logf("handover after a graceful release (%d trials), and the API server's floor during meshd's", cfg.Trials)
		for _, impl := range impls {
			if impl == bench.Meshd {
				h, floor := bench.RunHandoverWithFloor(ctx, env, cfg, impl)
				res.Handover, res.Floor = append(res.Handover, h), &floor
				continue
			}
			res.Handover = append(res.Handover, bench.RunTakeover(ctx, env, cfg, impl, true))
		}
	}
	if sections["steal"] {
		logf("steal after a default-revision change (%d trials)", cfg.Trials)
		for _, impl := range impls {
			if impl == bench.ClientGo {
				continue // no priorities
			}
			res.Steal = append(res.Steal, bench.RunSteal(ctx, env, cfg, impl))
		}
		logf("forced steal from client-go's elector (%d trials)", cfg.Trials)
		for _, impl := range impls {
			if impl == bench.ClientGo {
				continue // the holder
			}
			res.Forced = append(res.Forced, bench.RunForced(ctx, env, cfg, impl))
		}
	}
	if sections["failover"] {
		logf("failover after a crash (%d trials)", cfg.Trials)
		for _, impl := range impls {
			res.Failover = append(res.Failover, bench.RunTakeover(ctx, env, cfg, impl, false))
		}
	}
	if sections["kubelet"] {
		runKubelet(ctx, env, cfg, kubeletTTLs, impls, bench.KubeletSpawn{Executable: exe, Args: podReplicaArgs}, res)
	}
	if sections["requests"] {
		// Counts do not depend on timing: run the implementations at once.
		logf("API requests of one election, %d replicas, over %v", bench.RequestsReplicas, o.requestsWindow)
		res.RequestsWindow = o.requestsWindow
		res.Requests = make([]bench.RequestsResult, len(impls))
		var wg sync.WaitGroup
		for i, impl := range impls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res.Requests[i] = bench.RunRequests(ctx, env, cfg, impl, o.requestsWindow)
			}()
		}
		wg.Wait()
	}
	if sections["long-ttl"] {
		logf("handover and steal again at ttl %v (%d trials, implementations side by side)", long.TTL, long.Trials)
		res.LongTTL = rerun(ctx, env, long, impls)
	}
	if sections["coordinated"] {
		if err := runCoordinated(ctx, cfg, res); err != nil {
			return err
		}
	}
	if sections["scale"] {
		sc := bench.ScaleConfig{
			TTL: o.scaleTTL, Pause: 2 * time.Second, Window: o.scaleWindow,
			Kubeconfig: env.Kubeconfig, LogDir: o.replicaLogs, ProfileDir: o.replicaHeap, Executable: exe, ReplicaArgs: replicaArgs, Impls: scaleImpls, Logf: logf,
		}
		res.Scale = &bench.ScaleMatrix{Cells: cells, Skip: skip}
		res.ScaleDefaults = !o.quick && !isSet("scale-cells") && !isSet("scale-skip")
		res.ScaleTTL, res.ScalePause, res.ScaleWindow = sc.TTL, sc.Pause, sc.Window
		logf("scale: cells %s (in this order), implementations %s, skipping %q, ttl %v, window %v",
			cellList(res.Scale.RunOrder()), o.impls, o.scaleSkip, sc.TTL, sc.Window)
		bench.RunMatrix(ctx, env, sc, res.Scale)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	res.Elapsed = time.Since(began)

	var buf bytes.Buffer
	res.WriteMarkdown(&buf)
	os.Stdout.Write(buf.Bytes())
	if o.out != "" {
		if err := os.WriteFile(o.out, buf.Bytes(), 0o644); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	return nil
}

// runCoordinated measures the coordinated mode on a control plane of its
// own, with coordinated leader election turned on, so that the other
// sections run on a plain API server like istiod's clusters have.
func runCoordinated(ctx context.Context, cfg bench.Config, res *bench.Results) error {
	logf("coordinated mode (%d trials): starting a second control plane with %v", cfg.Trials, bench.CoordinatedAPIServerFlags)
	env, err := bench.StartEnv(bench.CoordinatedAPIServerFlags...)
	if err != nil {
		return fmt.Errorf("coordinated: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			logf("stopping the coordinated control plane: %v", err)
		}
	}()
	c := bench.RunCoordinated(ctx, env, cfg)
	res.Coordinated = &c
	return nil
}

// runKubelet measures the failover after a crash reported by the kubelet
// at each ttl, for meshd and client-go, every implementation and ttl at
// the same time: the trials mostly wait (for a lease, or a pause).
func runKubelet(ctx context.Context, env *bench.Env, cfg bench.Config, ttls []time.Duration, impls []bench.Impl, spawn bench.KubeletSpawn, res *bench.Results) {
	var runs []bench.KubeletResult
	for _, ttl := range ttls {
		for _, impl := range impls {
			if impl == bench.Meshd || impl == bench.ClientGo {
				runs = append(runs, bench.KubeletResult{Impl: impl, TTL: ttl})
			}
		}
	}
	logf("failover after a crash reported by the kubelet %v later (%d trials, ttls %v, side by side)", bench.KubeletReportDelay, cfg.Trials, ttls)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			c := cfg
			c.TTL = runs[i].TTL
			runs[i] = bench.RunKubeletFailover(ctx, env, c, runs[i].Impl, spawn)
		})
	}
	wg.Wait()
	res.Kubelet = runs
}

// parseTTLs reads a comma-separated list of ttls.
func parseTTLs(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if err := (bench.Config{TTL: d, Trials: 1}).Validate(); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// rerun measures handover and steal at cfg's ttl, every implementation at
// the same time: at a long ttl the trials mostly wait for retry periods.
func rerun(ctx context.Context, env *bench.Env, cfg bench.Config, impls []bench.Impl) *bench.Rerun {
	out := &bench.Rerun{Config: cfg, Handover: make([]bench.TakeoverResult, len(impls))}
	var steal []bench.Impl
	for _, impl := range impls {
		if impl != bench.ClientGo {
			steal = append(steal, impl)
		}
	}
	out.Steal = make([]bench.StealResult, len(steal))
	var wg sync.WaitGroup
	for i, impl := range impls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Handover[i] = bench.RunTakeover(ctx, env, cfg, impl, true)
		}()
	}
	for i, impl := range steal {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Steal[i] = bench.RunSteal(ctx, env, cfg, impl)
		}()
	}
	wg.Wait()
	return out
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// setDefault changes a flag's value unless it was given on the command line.
func setDefault[T any](name string, p *T, v T) {
	if !isSet(name) {
		*p = v
	}
}

// isSet reports whether a flag was given on the command line.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func implNames(impls []bench.Impl) []string {
	out := make([]string, len(impls))
	for i, impl := range impls {
		out[i] = string(impl)
	}
	return out
}

func cellList(cells []bench.Cell) string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = c.Short()
	}
	return strings.Join(out, ",")
}

// command reconstructs how the benchmark was started.
func command() string {
	args := os.Args[1:]
	cmd := "go run ./internal/tools/cmd/bench"
	if len(args) > 0 {
		cmd += " " + strings.Join(args, " ")
	}
	return cmd
}

func parseSections(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		known := false
		for _, k := range allSections {
			known = known || k == name
		}
		if !known {
			return nil, fmt.Errorf("unknown section %q (want some of %s)", name, strings.Join(allSections, ","))
		}
		out[name] = true
	}
	if len(out) == 0 {
		return nil, errors.New("no sections to run")
	}
	return out, nil
}

func parseImpls(s string) ([]bench.Impl, error) {
	var out []bench.Impl
	for _, f := range strings.Split(s, ",") {
		impl, err := bench.ParseImpl(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, impl)
	}
	return out, nil
}
