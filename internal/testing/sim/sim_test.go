//go:debug randseednop=0
package sim

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

var (
	flagSeeds = flag.Int("sim.seeds", 0, "number of random schedules TestSimulation runs (0: 1200, or 300 under -race)")
	flagSeed  = flag.Int64("sim.seed", 1, "first seed TestSimulation runs")
	flagV     = flag.Bool("sim.v", false, "print the trace of every failing schedule")
	flagShow  = flag.Int("sim.show", 3, "how many failing seeds TestSimulation describes in full")
	flagTrace = flag.Bool("sim.trace", false, "print the trace of every schedule TestSimulation runs, failing or not")
	flagMode  = flag.String("sim.mode", "classic", "which random schedules TestSimulation runs: classic (Generate) or sessions (GenerateSessions)")
	flagPrio  = flag.Bool("sim.priority", true, "check the priority invariant too (see the package doc); -sim.priority=false leaves it out")
)

// generate returns the schedule of seed in the mode -sim.mode names.
func generate(t *testing.T, seed int64) Schedule {
	var s Schedule
	switch *flagMode {
	case "classic":
		s = Generate(seed)
	case "sessions":
		s = GenerateSessions(seed)
	default:
		t.Fatalf("unknown -sim.mode %q: classic or sessions", *flagMode)
	}
	s.CheckPriority = *flagPrio
	return s
}

func TestMain(m *testing.M) {
	// client-go's reflectors report every broken watch; the trace says more.
	klog.SetLogger(logr.Discard())
	flag.Parse()
	// A trace that is printed also tells what each elector decided.
	TraceElectors = *flagV
	goleak.VerifyTestMain(m)
}

// budget is the number of schedules TestSimulation runs. Without
// -sim.seeds it is the package's own smoke run, kept to the time it took
// before every schedule ran Pods, every combination and the priority
// invariant (2,000 then); make sim passes its budgets explicitly.
func budget() int {
	switch {
	case *flagSeeds > 0:
		return *flagSeeds
	case raceEnabled:
		return 300
	default:
		return 1200
	}
}

// replayCommand is the command that runs one seed again, with its trace.
func replayCommand(seed int64) string {
	mode := ""
	if *flagMode != "classic" {
		mode = " -sim.mode=" + *flagMode
	}
	if !*flagPrio {
		mode += " -sim.priority=false"
	}
	return fmt.Sprintf("go test ./internal/testing/sim -run 'TestSimulation$'%s -sim.seed=%d -sim.seeds=1 -sim.v", mode, seed)
}

// TestSimulation runs -sim.seeds random schedules from -sim.seed on and
// fails with every seed that broke an invariant.
func TestSimulation(t *testing.T) {
	n, first := budget(), *flagSeed
	start := time.Now()
	var failed []int64
	byInvariant := map[string]int{}
	steps, starts := 0, 0
	for i := 0; i < n; i++ {
		seed := first + int64(i)
		res := Run(t, generate(t, seed))
		steps += res.Steps
		starts += res.WorkStarts
		if *flagTrace {
			t.Logf("trace of seed %d:\n%s", seed, res.Trace)
		}
		if len(res.Violations) == 0 {
			continue
		}
		failed = append(failed, seed)
		seen := map[string]bool{}
		for _, v := range res.Violations {
			if !seen[v.Invariant] {
				seen[v.Invariant] = true
				byInvariant[v.Invariant]++
			}
		}
		if len(failed) <= *flagShow || *flagV {
			t.Errorf("seed %d broke %d invariant(s):\n  %s\nreplay: %s", seed, len(res.Violations),
				joinViolations(res.Violations), replayCommand(seed))
			if *flagV {
				t.Logf("trace of seed %d:\n%s", seed, res.Trace)
			}
		}
	}
	t.Logf("%s: %d schedules (seeds %d..%d) in %v: %d steps, %d terms of work; %d failed",
		*flagMode, n, first, first+int64(n)-1, time.Since(start).Round(time.Millisecond), steps, starts, len(failed))
	if len(failed) > 0 {
		t.Errorf("failing seeds (%d): %v; seeds per invariant: %v", len(failed), head(failed, 50), byInvariant)
	}
}

func joinViolations(vs []Violation) string {
	parts := make([]string, 0, len(vs))
	for _, v := range head(vs, 5) {
		parts = append(parts, v.String())
	}
	return strings.Join(parts, "\n  ")
}

func head[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}
