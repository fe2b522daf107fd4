package sim

import (
	"testing"
)

// The budgets of fresh schedules make sim (and so make test) runs from a
// base seed drawn for the run: SIM_FRESH_SEEDS and SIM_FRESH_SESSION_SEEDS
// in the Makefile.
const (
	freshClassicBudget = 4000
	freshSessionBudget = 2000
)

// TestEveryAcceptedCombinationIsDrawn enumerates the combinations the
// library accepts and fails if one had no schedule among the fresh
// schedules of make test from a base seed, for several bases: every
// combination must be some candidate's, in classic or session mode. The
// first candidate takes the combinations in turn by seed, so any base
// covers every one as long as each mode has no more combinations than its
// budget; the test checks that too.
func TestEveryAcceptedCombinationIsDrawn(t *testing.T) {
	all := AcceptedCombinations()
	classic, sessions := combinationsOf(false), combinationsOf(true)
	if len(classic)+len(sessions) != len(all) || len(classic) == 0 || len(sessions) == 0 {
		t.Fatalf("%d combinations, %d classic and %d with sessions", len(all), len(classic), len(sessions))
	}
	if len(classic) > freshClassicBudget || len(sessions) > freshSessionBudget {
		t.Fatalf("%d classic and %d session combinations do not fit the budgets of %d and %d schedules",
			len(classic), len(sessions), freshClassicBudget, freshSessionBudget)
	}
	// Every dimension of the configuration appears in every value.
	seen := map[string]bool{}
	for _, c := range all {
		for _, v := range []string{"mode=" + c.Mode, "election=" + c.Election, "lock=" + c.Lock, "sessions=" + c.Sessions,
			"start-at-once=" + c.StartAtOnce, "handover=" + c.Handover, "watch=" + c.Watch, "location=" + c.Location} {
			seen[v] = true
		}
	}
	for _, v := range []string{"mode=racing", "mode=coordinated", "mode=oldest-emulation-version", "election=prioritized",
		"election=per-revision", "lock=configmap", "lock=lease", "lock=multilock", "sessions=on", "sessions=off",
		"start-at-once=on", "start-at-once=off", "handover=on", "handover=off", "watch=on", "watch=off", "watch=broken",
		"location=local", "location=remote"} {
		if !seen[v] {
			t.Errorf("no accepted combination has %s", v)
		}
	}
	bases := []int64{7100000001}
	if *flagSeed != 1 {
		bases = append(bases, *flagSeed)
	}
	for _, base := range bases {
		drawn := map[Combination]int{}
		for i := int64(0); i < freshClassicBudget; i++ {
			for _, c := range Generate(base + i).Combinations {
				drawn[c]++
			}
		}
		for i := int64(0); i < freshSessionBudget; i++ {
			for _, c := range GenerateSessions(base + i).Combinations {
				drawn[c]++
			}
		}
		for _, c := range all {
			if drawn[c] == 0 {
				t.Errorf("base seed %d: no schedule runs %v", base, c)
			}
		}
		for c := range drawn {
			if !isAccepted(all, c) {
				t.Errorf("base seed %d: a schedule runs %v, which the library does not accept", base, c)
			}
		}
	}
	t.Logf("%d accepted combinations (%d classic, %d with sessions), each drawn from every base", len(all), len(classic), len(sessions))
}

func isAccepted(all []Combination, c Combination) bool {
	for _, a := range all {
		if a == c {
			return true
		}
	}
	return false
}
