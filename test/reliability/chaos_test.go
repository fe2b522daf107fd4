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
	bin := meshdBinary(t)
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := chaos.Run(ctx, chaos.Config{
		Cluster:     cluster,
		MeshdBinary: bin,
		Dir:         t.TempDir(),
		Seed:        chaosSeed,
		Duration:    55 * time.Second,
		MaxFaults:   10,
		Instances:   4,
		TTL:         4 * time.Second,
		Kinds: []chaos.Kind{chaos.KillLeader, chaos.TermLeader, chaos.PartitionLeader, chaos.PartitionAll,
			chaos.FlipDefault, chaos.BogusHolder, chaos.CorruptRecord, chaos.RestartAPIServer, chaos.DeleteLock, chaos.ResetLeader},
		Log: &progress,
	})
	t.Logf("chaos run (seed %d) took %v:\n%s", chaosSeed, time.Since(start).Round(time.Second), progress.String())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	if len(rep.Faults) < 8 {
		t.Errorf("only %d faults injected in the time budget, want at least 8", len(rep.Faults))
	}
	for _, f := range rep.Failures() {
		t.Error(f)
	}
}

// TestChaosShortSessions is a smaller chaos run with every meshd started
// with --sessions: one fault of each of the five kinds that matter most to
// sessions (a holder killed, stopped or cut off, its lock deleted, its
// session Lease deleted), the same checks.
func TestChaosShortSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes about 40 seconds")
	}
	bin := meshdBinary(t)
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := chaos.Run(ctx, chaos.Config{
		Cluster:     cluster,
		MeshdBinary: bin,
		Dir:         t.TempDir(),
		Seed:        sessionChaosSeed,
		Duration:    35 * time.Second,
		MaxFaults:   5,
		Instances:   4,
		TTL:         4 * time.Second,
		Sessions:    true,
		Kinds:       []chaos.Kind{chaos.KillLeader, chaos.PartitionLeader, chaos.DeleteLock, chaos.DeleteSession, chaos.TermLeader},
		Log:         &progress,
	})
	t.Logf("chaos run with sessions (seed %d) took %v:\n%s", sessionChaosSeed, time.Since(start).Round(time.Second), progress.String())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	if len(rep.Faults) < 5 {
		t.Errorf("only %d faults injected in the time budget, want 5", len(rep.Faults))
	}
	for _, f := range rep.Failures() {
		t.Error(f)
	}
}
