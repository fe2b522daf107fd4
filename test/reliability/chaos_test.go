package reliability

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/tools/chaos"
)

// chaosSeed fixes the short run's sequence. The long run is "make chaos".
const chaosSeed = 20260102

// sessionChaosSeed fixes the short sessions run's sequence: it deletes the
// lock of a Lease election last, when its holder has renewed through its
// session, not its record, for longer than a lease.
const sessionChaosSeed = 20260103

// TestChaosShort is a small chaos run: four meshd processes (two revisions),
// each behind its own fault proxy, and one fault of each of ten kinds in a
// seeded order. It fails on any overlap of two leaders, an election left
// without a leader for longer than the bound, thrash, lost data or a crash.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes about a minute")
	}
	runShortChaos(t, "chaos run", 4*time.Minute, 8, "at least 8", chaos.Config{
		Seed:      chaosSeed,
		Duration:  55 * time.Second,
		MaxFaults: 10,
		Kinds: []chaos.Kind{chaos.KillLeader, chaos.TermLeader, chaos.PartitionLeader, chaos.PartitionAll,
			chaos.FlipDefault, chaos.BogusHolder, chaos.CorruptRecord, chaos.RestartAPIServer, chaos.DeleteLock, chaos.ResetLeader},
	})
}

// TestChaosShortSessions is a smaller chaos run with every meshd started
// with --sessions: one fault of each of the five kinds that matter most to
// sessions (a holder killed, stopped or cut off, its lock deleted, its
// session Lease deleted), the same checks.
func TestChaosShortSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes about 40 seconds")
	}
	runShortChaos(t, "chaos run with sessions", 3*time.Minute, 5, "5", chaos.Config{
		Seed:      sessionChaosSeed,
		Duration:  35 * time.Second,
		MaxFaults: 5,
		Sessions:  true,
		Kinds:     []chaos.Kind{chaos.KillLeader, chaos.PartitionLeader, chaos.DeleteLock, chaos.DeleteSession, chaos.TermLeader},
	})
}

// podChaosSeed fixes the short run in Pods.
const podChaosSeed = 20260104

// TestChaosShortPods is a small chaos run with every meshd in a Pod whose
// status the run writes as the kubelet would, so that Pod-aware failover
// is on: leaders killed with and without the kubelet's report of their
// end, cut off, and stopped. A successor that takes over on the report
// must never run beside the killed process's work.
func TestChaosShortPods(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes about 40 seconds")
	}
	runShortChaos(t, "chaos run in Pods", 3*time.Minute, 4, "4", chaos.Config{
		Seed:      podChaosSeed,
		Duration:  30 * time.Second,
		MaxFaults: 5,
		Pods:      true,
		Kinds:     []chaos.Kind{chaos.KillReportedLeader, chaos.KillLeader, chaos.PartitionLeader, chaos.TermLeader},
	})
}

// runShortChaos runs cfg with four meshd processes at ttl 4s on the shared
// cluster, within limit, and fails on any failure of the report or when
// fewer than minFaults faults were injected.
func runShortChaos(t *testing.T, what string, limit time.Duration, minFaults int, want string, cfg chaos.Config) {
	t.Helper()
	cfg.Cluster, cfg.MeshdBinary, cfg.Dir = cluster, meshdBinary(t), t.TempDir()
	cfg.Instances, cfg.TTL = 4, 4*time.Second
	var progress bytes.Buffer
	cfg.Log = &progress
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	rep, err := chaos.Run(ctx, cfg)
	t.Logf("%s (seed %d) took %v:\n%s", what, cfg.Seed, time.Since(start).Round(time.Second), progress.String())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	if len(rep.Faults) < minFaults {
		t.Errorf("only %d faults injected in the time budget, want %s", len(rep.Faults), want)
	}
	for _, f := range rep.Failures() {
		t.Error(f)
	}
}
