package chaos

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanIsReproducibleAndCoversEveryKind(t *testing.T) {
	kinds := AllKinds()
	a := Plan(42, 30, kinds, 4*time.Second, 4, []string{"stable", "canary"})
	b := Plan(42, 30, kinds, 4*time.Second, 4, []string{"stable", "canary"})
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two plans")
	}
	if reflect.DeepEqual(a, Plan(43, 30, kinds, 4*time.Second, 4, []string{"stable", "canary"})) {
		t.Fatal("two seeds gave the same plan")
	}
	seen := map[Kind]int{}
	for i, f := range a {
		seen[f.Kind]++
		if i < len(kinds) && seen[f.Kind] > 1 {
			t.Fatalf("%s twice in the first round", f.Kind)
		}
		switch f.Kind {
		case PartitionLeader, PartitionAll:
			if f.Hold <= 4*time.Second {
				t.Errorf("%v: a partition must outlast the lease", f)
			}
		case SlowLeader:
			if f.Latency <= 2*time.Second {
				t.Errorf("%v: latency must exceed the renew deadline", f)
			}
		}
		if f.Election < 0 || f.Election >= 4 {
			t.Errorf("%v: election %d out of range", f, f.Election)
		}
	}
	for _, k := range kinds {
		if seen[k] < 2 {
			t.Errorf("%s drawn %d times in 30 faults", k, seen[k])
		}
	}
}

func TestParseKinds(t *testing.T) {
	if k, err := ParseKinds("all", false); err != nil || !reflect.DeepEqual(k, AllKinds()) {
		t.Fatalf("all: %v, %v", k, err)
	}
	if k, err := ParseKinds("all", true); err != nil || !reflect.DeepEqual(k, append(AllKinds(), SessionKinds()...)) || !slices.Contains(k, DeleteSession) {
		t.Fatalf("all with sessions: %v, %v", k, err)
	}
	if k, err := ParseKinds(" kill-leader, delete-lock,kill-leader ", false); err != nil || len(k) != 2 {
		t.Fatalf("list: %v, %v", k, err)
	}
	if k, err := ParseKinds("delete-session", false); err != nil || !reflect.DeepEqual(k, []Kind{DeleteSession}) {
		t.Fatalf("a session kind is parsed (CheckSettings refuses it without sessions): %v, %v", k, err)
	}
	if _, err := ParseKinds("kill-leader,unplug", false); err == nil || !strings.Contains(err.Error(), "unplug") {
		t.Fatalf("unknown kind: %v", err)
	}
	if _, err := ParseKinds(",,", false); err == nil {
		t.Fatal("empty list accepted")
	}
}

// TestPlanWithoutSessionKindsIsUnchanged: the session kinds are not drawn
// unless asked for, so a seed's plan without sessions stays what earlier
// runs recorded.
func TestPlanWithoutSessionKindsIsUnchanged(t *testing.T) {
	for _, f := range Plan(7, 60, DefaultKinds(false), 4*time.Second, 4, []string{"stable", "canary"}) {
		if slices.Contains(SessionKinds(), f.Kind) {
			t.Fatalf("%v drawn without sessions", f)
		}
	}
	n := 0
	for _, f := range Plan(7, 2*len(DefaultKinds(true)), DefaultKinds(true), 4*time.Second, 4, []string{"stable", "canary"}) {
		if f.Kind == DeleteSession {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("delete-session drawn %d times in two rounds with sessions, want 2", n)
	}
}

func TestSessionSettings(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Kinds: []Kind{DeleteSession}}, "fault kind delete-session needs Sessions"},
		{Config{Sessions: true, ElectionMode: "coordinated"}, "Sessions apply to racing elections only"},
		{Config{Sessions: true, ElectionMode: "racing"}, ""},
		{Config{Sessions: true, Kinds: []Kind{DeleteSession}}, ""},
	} {
		err := tc.cfg.CheckSettings()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: CheckSettings() = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if k := (Config{Sessions: true}).withDefaults().Kinds; !slices.Contains(k, DeleteSession) {
		t.Errorf("default kinds with sessions %v lack %s", k, DeleteSession)
	}
	if k := (Config{}).withDefaults().Kinds; slices.Contains(k, DeleteSession) {
		t.Errorf("default kinds without sessions %v include %s", k, DeleteSession)
	}
}

// The Pod kinds are drawn only by a run whose instances run in Pods, and
// need it; the plans of runs without Pods do not change.
func TestPodSettings(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Kinds: []Kind{KillReportedLeader}}, "fault kind kill-leader-reported needs Pods"},
		{Config{Pods: true, Kinds: []Kind{KillReportedLeader}}, ""},
		{Config{Pods: true, Sessions: true}, ""},
	} {
		err := tc.cfg.CheckSettings()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: CheckSettings() = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if k := (Config{Pods: true}).withDefaults().Kinds; !slices.Contains(k, KillReportedLeader) {
		t.Errorf("default kinds with Pods %v lack %s", k, KillReportedLeader)
	}
	for _, sessions := range []bool{false, true} {
		if k := (Config{Sessions: sessions}).withDefaults().Kinds; slices.Contains(k, KillReportedLeader) {
			t.Errorf("default kinds without Pods %v include %s", k, KillReportedLeader)
		}
	}
	if k, err := ParseKinds("kill-leader-reported", false); err != nil || !reflect.DeepEqual(k, []Kind{KillReportedLeader}) {
		t.Fatalf("a Pod kind is parsed (CheckSettings refuses it without Pods): %v, %v", k, err)
	}
	n := 0
	plan := Plan(7, 2*len(KnownKinds()), (Config{Pods: true}).withDefaults().Kinds, 4*time.Second, 4, []string{"stable", "canary"})
	for _, f := range plan {
		if f.Kind == KillReportedLeader {
			n++
			if f.RestartAfter < 0 || f.RestartAfter > 8*time.Second || !strings.Contains(f.String(), "restart after") {
				t.Errorf("%v: restart after %v", f, f.RestartAfter)
			}
		}
	}
	if n != 2 {
		t.Fatalf("kill-leader-reported drawn %d times in two rounds with Pods, want 2", n)
	}
}

func TestBound(t *testing.T) {
	// lease 4s + 2.2 x retry 1s + slack 1s
	if b := Bound(4*time.Second, time.Second); b != 7200*time.Millisecond {
		t.Fatalf("Bound = %v", b)
	}
}

// TestAnalyseFindsEveryFailure feeds analyse a run with an overlap, a gap
// beyond the bound, lost data and a crash.
func TestAnalyseFindsEveryFailure(t *testing.T) {
	s := Mono(time.Hour) // any start
	at := func(d time.Duration) Mono { return s.Add(d) }
	locks := daemonLocks([]string{"stable", "canary"})
	e := locks[0].name
	in := analysisInput{
		cfg:         Config{TTL: 4 * time.Second, Slack: time.Second, Seed: 1},
		locks:       locks[:1],
		started:     s,
		faultsFrom:  at(10 * time.Second),
		faultsUntil: at(60 * time.Second),
		intervals: []Interval{
			{Election: e, Holder: "a#1", Start: at(time.Second), Stop: at(20 * time.Second)},
			// b takes over 3s after a's kill: fine.
			{Election: e, Holder: "b#1", Start: at(23 * time.Second), Stop: at(40 * time.Second)},
			// c overlaps b by 1s.
			{Election: e, Holder: "c#1", Start: at(39 * time.Second), Stop: at(41 * time.Second)},
			// 10s without a leader after the partition of all healed at 45s.
			{Election: e, Holder: "a#2", Start: at(55 * time.Second), Stop: at(70 * time.Second)},
		},
		faults: []FaultRecord{
			{N: 1, Fault: Fault{Kind: KillLeader}, Start: at(20 * time.Second), Heal: at(20 * time.Second), Ref: at(20 * time.Second)},
			{N: 2, Fault: Fault{Kind: PartitionAll}, Start: at(41 * time.Second), Heal: at(45 * time.Second), Ref: at(45 * time.Second)},
			{N: 3, Fault: Fault{Kind: DeleteLock}, Start: at(58 * time.Second), Heal: at(58 * time.Second), Ref: at(58 * time.Second),
				Err: errors.New("forbidden")},
		},
		lost:    []string{"ConfigMap x/y: data key chaos-keep"},
		crashes: []string{"a#2 exited on its own"},
	}
	rep := analyse(in)
	if len(rep.Overlaps) != 1 || rep.Overlaps[0].Duration != time.Second {
		t.Errorf("overlaps = %+v, want one of 1s", rep.Overlaps)
	}
	if len(rep.Liveness) != 1 || !strings.Contains(rep.Liveness[0], "10s after #2 partition-all") {
		t.Errorf("liveness = %q, want the 10s after the partition", rep.Liveness)
	}
	if rep.WorstNoLeader != 10*time.Second {
		t.Errorf("worst time without leader = %v", rep.WorstNoLeader)
	}
	if len(rep.Lost) != 1 || len(rep.Crashes) != 1 || len(rep.InjectErrs) != 1 {
		t.Errorf("lost %q, crashes %q, inject errors %q", rep.Lost, rep.Crashes, rep.InjectErrs)
	}
	if rep.Passed() || len(rep.Failures()) != 5 {
		t.Errorf("failures = %q", rep.Failures())
	}
	var out strings.Builder
	rep.Print(&out)
	for _, want := range []string{"safety    FAIL", "liveness  FAIL", "data      FAIL", "kill-leader", "partition-all"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	// The same run without the faults' damage passes.
	in.intervals = in.intervals[:2]
	in.intervals[1].Stop = at(70 * time.Second)
	in.faults = in.faults[:1]
	in.lost, in.crashes = nil, nil
	if rep := analyse(in); !rep.Passed() {
		t.Errorf("clean run failed: %q", rep.Failures())
	}
}

func TestThrashIsReported(t *testing.T) {
	s := Mono(time.Hour)
	locks := daemonLocks([]string{"stable", "canary"})[:1]
	in := analysisInput{
		cfg: Config{TTL: 4 * time.Second, Slack: time.Second}, locks: locks,
		started: s, faultsFrom: s, faultsUntil: s.Add(time.Minute),
		faults: []FaultRecord{{N: 1, Fault: Fault{Kind: FlipDefault}, Start: s, Heal: s, Ref: s}},
	}
	// Ten terms alternating between two holders for one fault.
	for i := 0; i < 10; i++ {
		holder := []string{"a#1", "b#1"}[i%2]
		in.intervals = append(in.intervals, Interval{Election: locks[0].name, Holder: holder,
			Start: s.Add(time.Duration(i) * time.Second), Stop: s.Add(time.Duration(i+1) * time.Second)})
	}
	in.intervals[len(in.intervals)-1].Stop = s.Add(time.Minute)
	rep := analyse(in)
	if len(rep.Thrash) != 1 {
		t.Fatalf("thrash = %q", rep.Thrash)
	}
	if rep.Elections[0].HolderChanges != 9 {
		t.Fatalf("holder changes = %d", rep.Elections[0].HolderChanges)
	}
}
