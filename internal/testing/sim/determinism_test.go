package sim

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// busy keeps every processor of the machine busy until the returned stop is
// called, or a minute passes: artificial load, so that the goroutines of a
// schedule are preempted and scheduled in other orders than on an idle
// machine.
func busy() (stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			x := uint64(1)
			for ctx.Err() == nil {
				for i := 0; i < 1<<14; i++ {
					x = x*6364136223846793005 + 1442695040888963407
				}
				runtime.Gosched()
			}
			_ = x
		})
	}
	return func() { cancel(); wg.Wait() }
}

// firstDifference describes where two traces part.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return "line " + itoa(i+1) + ":\n    " + al[i] + "\n    " + bl[i]
		}
	}
	return "one trace is a prefix of the other (" + itoa(len(al)) + " and " + itoa(len(bl)) + " lines)"
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestReplayIsDeterministic runs a sample of schedules of both modes twice
// and requires the very same trace, line for line: once in a fresh world,
// once after other schedules ran in the process and with every processor
// kept busy by other goroutines. The world lets one goroutine act at a
// time wherever order matters (timers, API requests, watch events, random
// draws), so a seed's trace depends on nothing else.
func TestReplayIsDeterministic(t *testing.T) {
	n := 24
	if raceEnabled {
		n = 8
	}
	for _, mode := range []struct {
		name string
		gen  func(int64) Schedule
	}{{"classic", Generate}, {"sessions", GenerateSessions}} {
		t.Run(mode.name, func(t *testing.T) {
			first := make(map[int64]string, n)
			for seed := int64(1); seed <= int64(n); seed++ {
				first[seed] = Run(t, mode.gen(seed)).Trace
			}
			// Other schedules in between, and load.
			for seed := int64(5001); seed <= 5004; seed++ {
				Run(t, mode.gen(seed))
			}
			stop := busy()
			defer stop()
			for seed := int64(n); seed >= 1; seed-- { // and in the other order
				again := Run(t, mode.gen(seed)).Trace
				if again != first[seed] {
					t.Errorf("seed %d: two runs differ at %s", seed, firstDifference(first[seed], again))
				}
			}
		})
	}
}
func TestGenerateIsAFunctionOfTheSeed(t *testing.T) {
	a, b := Generate(42), Generate(42)
	if len(a.Actions) != len(b.Actions) || len(a.Candidates) != len(b.Candidates) || a.Duration != b.Duration {
		t.Fatalf("two schedules of seed 42 differ: %d/%d actions, %d/%d candidates", len(a.Actions), len(b.Actions), len(a.Candidates), len(b.Candidates))
	}
	for i := range a.Actions {
		if a.Actions[i].At != b.Actions[i].At || a.Actions[i].Name != b.Actions[i].Name {
			t.Fatalf("action %d differs: %v %q vs %v %q", i, a.Actions[i].At, a.Actions[i].Name, b.Actions[i].At, b.Actions[i].Name)
		}
	}
	if c := Generate(43); c.Duration == a.Duration && len(c.Actions) == len(a.Actions) && len(c.Candidates) == len(a.Candidates) &&
		c.Candidates[0] == a.Candidates[0] {
		t.Fatalf("seeds 42 and 43 gave the same schedule")
	}
}
