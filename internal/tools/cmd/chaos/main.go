// Command chaos runs meshd under injected faults against a local
// kube-apiserver and etcd (started from .cache/kube/bin, see make kube-bins)
// and checks safety, liveness, thrash and data loss; see internal/tools/chaos.
//
//	go run ./internal/tools/cmd/chaos -duration 3m -seed 42
//	go run ./internal/tools/cmd/chaos -duration 3m -seed 42 -sessions
//	go run ./internal/tools/cmd/chaos -duration 1m -pods -kinds kill-leader-reported,kill-leader
//
// It prints the seed first: the same seed injects the same sequence of
// faults. It exits 0 when every check passed, 1 when one failed and 2 when
// the run itself could not be carried out. Everything listens on 127.0.0.1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/meshd-io/meshd/internal/testing/testcluster"
	"github.com/meshd-io/meshd/internal/tools/chaos"
	"github.com/meshd-io/meshd/pkg/election"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		seed      = fs.Uint64("seed", 0, "seed of the fault sequence; 0 picks one from the clock (it is printed)")
		duration  = fs.Duration("duration", 3*time.Minute, "how long to inject faults (at most 1h)")
		maxFaults = fs.Int("faults", 100, "at most this many faults")
		instances = fs.Int("instances", 4, "meshd processes, 3 to 5, alternating revisions stable and canary")
		ttl       = fs.Duration("ttl", 4*time.Second, "meshd --ttl: lease ttl, renew deadline ttl/2, retry period ttl/4")
		kinds     = fs.String("kinds", "all", "comma-separated fault kinds to draw from: "+kindNames(chaos.KnownKinds()))
		meshd     = fs.String("meshd", "", "meshd binary; empty builds ./cmd/meshd into the work directory")
		dir       = fs.String("dir", "", "work directory for logs and ledgers; empty makes a temporary one")
		keep      = fs.Bool("keep", false, "keep the work directory even when every check passed")
		quiet     = fs.Bool("quiet", false, "print only the seed and the report, not every fault")
		mode      = fs.String("election-mode", "racing", "meshd --election-mode; a coordinated mode starts the control plane with coordinated leader election on")
		sessions  = fs.Bool("sessions", false, "start every meshd with --sessions (racing mode only); \"all\" kinds then include "+kindNames(chaos.SessionKinds()))
		pods      = fs.Bool("pods", false, "run every meshd in a Pod whose status the run writes as the kubelet would (Pod-aware failover on); \"all\" kinds then include "+kindNames(chaos.PodKinds()))
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "chaos: unexpected arguments %q\n", fs.Args())
		return 2
	}
	electionMode, err := election.ParseMode(*mode)
	if err != nil {
		fmt.Fprintf(stderr, "chaos: -election-mode: %v\n", err)
		return 2
	}
	*mode = string(electionMode)
	selected, err := chaos.ParseKinds(*kinds, *sessions)
	if err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 2
	}
	if k := strings.TrimSpace(*kinds); *pods && (k == "" || k == "all") {
		selected = append(selected, chaos.PodKinds()...)
	}
	settings := chaos.Config{Duration: *duration, MaxFaults: *maxFaults, Instances: *instances, TTL: *ttl, Kinds: selected,
		ElectionMode: *mode, Sessions: *sessions, Pods: *pods}
	if err := settings.CheckSettings(); err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 2
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano()%1_000_000) + 1
	}
	fmt.Fprintf(stdout, "chaos: seed %d (rerun with -seed %d)\n", *seed, *seed)

	work := *dir
	if work == "" {
		if work, err = os.MkdirTemp("", "meshd-chaos-"); err != nil {
			fmt.Fprintf(stderr, "chaos: %v\n", err)
			return 2
		}
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 2
	}
	passed := false
	defer func() {
		if passed && !*keep && *dir == "" {
			os.RemoveAll(work)
			return
		}
		fmt.Fprintf(stdout, "chaos: logs, ledgers and kubeconfigs are in %s\n", work)
	}()

	// Bounded overall: the faults, plus time to start and stop everything.
	ctx, cancel := context.WithTimeout(context.Background(), *duration+15*time.Minute)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	binary := *meshd
	if binary == "" {
		binary = filepath.Join(work, "meshd")
		if err := build(ctx, binary); err != nil {
			fmt.Fprintf(stderr, "chaos: %v\n", err)
			return 2
		}
	} else if binary, err = filepath.Abs(binary); err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 2
	}

	var progress io.Writer = stdout
	if *quiet {
		progress = io.Discard
	}
	fmt.Fprintln(progress, "chaos: starting kube-apiserver and etcd on 127.0.0.1")
	apiFlags := []string{"--shutdown-watch-termination-grace-period=2s"}
	if *mode != "racing" {
		apiFlags = append(apiFlags, "--feature-gates=CoordinatedLeaderElection=true", "--runtime-config=coordination.k8s.io/v1beta1=true")
	}
	cluster, err := testcluster.Start(testcluster.Options{Dir: filepath.Join(work, "cluster"), APIServerFlags: apiFlags})
	if err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return 2
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(stderr, "chaos: stop the cluster: %v\n", err)
		}
	}()

	rep, err := chaos.Run(ctx, chaos.Config{
		Cluster:      cluster,
		MeshdBinary:  binary,
		Dir:          filepath.Join(work, "meshd"),
		Seed:         *seed,
		Duration:     *duration,
		MaxFaults:    *maxFaults,
		Instances:    *instances,
		TTL:          *ttl,
		Kinds:        selected,
		Log:          progress,
		ElectionMode: *mode,
		Sessions:     *sessions,
		Pods:         *pods,
	})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "chaos: interrupted")
		} else {
			fmt.Fprintf(stderr, "chaos: %v\n", err)
		}
		return 2
	}
	fmt.Fprintln(stdout)
	rep.Print(stdout)
	if !rep.Passed() {
		return 1
	}
	passed = true
	return 0
}

func kindNames(kinds []chaos.Kind) string {
	var s string
	for i, k := range kinds {
		if i > 0 {
			s += ","
		}
		s += string(k)
	}
	return s
}

// build compiles ./cmd/meshd of the repository holding the working
// directory into out.
func build(ctx context.Context, out string) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := testcluster.RepoRoot(wd)
	if err != nil {
		return fmt.Errorf("find the repository to build meshd (or pass -meshd): %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/meshd")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/meshd: %v\n%s", err, b)
	}
	return nil
}
