package sim

import "testing"

// TestPodScenariosNeedTheProofRules runs each scenario of Pod-aware
// failover with its protection disabled and expects it to fail: the
// takeover at the report without the failover, and the others with a
// naive judge that takes a missing, not ready or terminated Pod of the
// holder's name for its exit, now or before its last restart.
func TestPodScenariosNeedTheProofRules(t *testing.T) {
	naive := func(sc Scenario) Scenario {
		sc.Schedule.NaiveHolderExit = true
		return sc
	}
	for _, sc := range []Scenario{
		podExitReportedTakeover(false),
		naive(podForceDeletedNoEarlyTakeover()),
		naive(podPartitionNoEarlyTakeover()),
		naive(podRestartedUnderSameName()),
	} {
		t.Run(sc.Name, func(t *testing.T) {
			res := Run(t, sc.Schedule)
			if len(res.Violations) == 0 {
				t.Errorf("case %s passes with its protection disabled:\n%s", sc.Case, res.Trace)
				return
			}
			t.Logf("without its protection: %s", joinViolations(res.Violations))
		})
	}
}
