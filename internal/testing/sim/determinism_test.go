package sim

import "testing"

// TestReplayIsDeterministic runs schedules twice and compares their traces.
// The harness settles after every step, but goroutines woken in the same
// step still race (see the package documentation), so a few traces may
// differ; far more than a few means something made the harness itself
// non-deterministic (a map walked in its order, an unseeded random draw).
func TestReplayIsDeterministic(t *testing.T) {
	n := 40
	if raceEnabled {
		n = 10
	}
	same := 0
	for seed := int64(1); seed <= int64(n); seed++ {
		a, b := Run(t, Generate(seed)), Run(t, Generate(seed))
		if a.Trace == b.Trace {
			same++
			continue
		}
		t.Logf("seed %d: two runs differ", seed)
	}
	if same*4 < n*3 {
		t.Fatalf("only %d of %d schedules replayed identically", same, n)
	}
	t.Logf("%d of %d schedules replayed identically", same, n)
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
