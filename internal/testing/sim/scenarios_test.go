package sim

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childEnv names the scenario a child process runs (see Scenario.Subprocess).
const childEnv = "SIM_SCENARIO_CHILD"

// TestScenarios runs every named regression case.
func TestScenarios(t *testing.T) {
	child := os.Getenv(childEnv)
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			if sc.Subprocess && child != sc.Name {
				runChild(t, sc)
				return
			}
			runScenario(t, sc)
		})
	}
}

func runScenario(t *testing.T, sc Scenario) {
	res := Run(t, sc.Schedule)
	if res.Rejected != nil {
		t.Logf("the elector refuses this configuration, which closes the case: %v", res.Rejected)
	}
	if *flagV {
		defer t.Logf("trace:\n%s", res.Trace)
	}
	if len(res.Violations) == 0 {
		return
	}
	t.Errorf("case %s: %d violation(s):\n  %s\nreplay: go test ./internal/testing/sim -run 'TestScenarios/%s$' -sim.v",
		sc.Case, len(res.Violations), joinViolations(res.Violations), sc.Name)
}

// runChild runs the scenario in a child process of this test binary, so
// that a panic the elector lets through fails the test instead of ending
// the whole run.
func runChild(t *testing.T, sc Scenario) {
	args := []string{"-test.run=^TestScenarios$/^" + sc.Name + "$", "-test.count=1"}
	if *flagV {
		args = append(args, "-sim.v", "-test.v")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"="+sc.Name)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	msg := string(out)
	if i := strings.Index(msg, "panic: "); i >= 0 {
		msg = msg[i:min(len(msg), i+600)]
	}
	t.Errorf("case %s: the process running the scenario failed (%v):\n%s\nreplay: go test ./internal/testing/sim -run 'TestScenarios/%s$' -sim.v",
		sc.Case, err, msg, sc.Name)
}
