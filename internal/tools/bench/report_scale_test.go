package bench

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

const testWindow = 22500 * time.Millisecond

// fakeScale is a result whose replicas split the leaders evenly, renew each
// record 3 times in the window (per-record), or send only 3 heartbeat
// updates each (session), and use the given resources.
func fakeScale(impl Impl, cell Cell, rssMiB, cpuPercent float64, settle time.Duration) ScaleResult {
	res := ScaleResult{Impl: impl, Cell: cell}
	for i := 0; i < cell.Replicas; i++ {
		lead := cell.Elections / cell.Replicas
		if i < cell.Elections%cell.Replicas {
			lead++
		}
		p := ReplicaReport{
			Event: EventResult, Window: testWindow, Settle: settle, Goroutines: 2 * cell.Elections,
			CPU:        time.Duration(cpuPercent / 100 * float64(testWindow)),
			PeakRSSKiB: int64(rssMiB * 1024), Leading: lead,
		}
		switch impl {
		case MeshdSession:
			p.Requests = Counts{VerbUpdate: 3}
		case Meshd:
			p.Requests = Counts{VerbUpdate: 3 * lead}
			p.LeaderRequests = Counts{VerbUpdate: 3 * lead}
		default:
			p.Requests = Counts{VerbUpdate: 3 * lead, VerbGet: 4 * (cell.Elections - lead)}
			p.LeaderRequests = Counts{VerbUpdate: 3 * lead}
			p.FollowerRequests = Counts{VerbGet: 4 * (cell.Elections - lead)}
		}
		res.Replicas = append(res.Replicas, p)
	}
	return res
}

// goodMatrix meets every scale target.
func goodMatrix() *ScaleMatrix {
	at, large := ScaleTargetCell, ScaleLargeCell
	return &ScaleMatrix{Cells: []Cell{at, large}, Results: []ScaleResult{
		fakeScale(Meshd, at, 50, 1, 400*time.Millisecond),
		fakeScale(MeshdSession, at, 40, 0.5, 300*time.Millisecond),
		fakeScale(ClientGo, at, 120, 5, 20*time.Second),
		fakeScale(Meshd, large, 200, 5, 3*time.Second),
		fakeScale(MeshdSession, large, 150, 2, 2*time.Second),
		{Impl: ClientGo, Cell: large, Err: "replica 0: timed out", Unsettled: 700, UnsettledReplicas: 3, UnsettledRSSKiB: 600 << 10},
	}}
}

// scaleSummary returns the summary rows of the scale targets, by target.
func scaleSummary(t *testing.T, m *ScaleMatrix) map[string][]string {
	t.Helper()
	tb := newTable("target", "measured", "verdict")
	(&Results{Scale: m, ScaleTTL: 30 * time.Second}).writeScaleTargets(tb)
	out := map[string][]string{}
	for _, row := range tb.rows {
		out[row[0]] = row
	}
	return out
}

// row finds the summary row whose target contains key.
func row(t *testing.T, rows map[string][]string, key string) []string {
	t.Helper()
	for target, r := range rows {
		if strings.Contains(target, key) {
			return r
		}
	}
	t.Fatalf("no summary row about %q in %v", key, rows)
	return nil
}

var scaleTargetKeys = []string{"peak RSS", "settle <", "CPU per replica", "0 responses 5xx", "session mode: under", "per-record mode", "0 new terms", "5000x3 completes"}

func TestScaleTargetsMet(t *testing.T) {
	rows := scaleSummary(t, goodMatrix())
	for _, key := range scaleTargetKeys {
		r := row(t, rows, key)
		if strings.Contains(r[2], "not met") || !strings.Contains(r[2], "met") {
			t.Errorf("%q: verdict %q, want met (measured %q)", key, r[2], r[1])
		}
	}
	if got := row(t, rows, "5000x3 completes")[1]; !strings.Contains(got, "client-go not settled in 3m0s") {
		t.Errorf("5000x3 row %q does not say that client-go did not settle", got)
	}
	if got := row(t, rows, "per-record mode")[1]; !strings.Contains(got, "leaders update 3000 (1000 elections x 3 retry periods = 3000), followers none, other none") {
		t.Errorf("per-record row %q lacks the request split at 1000x3", got)
	}
}

// TestScaleTargetsFail checks that every target fails when its figure is
// off, for the mode whose figure is off.
func TestScaleTargetsFail(t *testing.T) {
	at, large := ScaleTargetCell, ScaleLargeCell
	replica := func(m *ScaleMatrix, impl Impl, cell Cell, f func(*ReplicaReport)) {
		for i := range m.Results {
			if m.Results[i].Impl == impl && m.Results[i].Cell == cell {
				f(&m.Results[i].Replicas[1])
			}
		}
	}
	for _, tc := range []struct {
		name, key string
		bad       Impl
		change    func(m *ScaleMatrix)
	}{
		{"RSS over 64 MiB", "peak RSS", Meshd, func(m *ScaleMatrix) {
			replica(m, Meshd, at, func(p *ReplicaReport) { p.PeakRSSKiB = 65 << 10 })
		}},
		{"RSS over client-go's", "peak RSS", Meshd, func(m *ScaleMatrix) {
			for i := range m.Results[2].Replicas { // client-go at 1000x3
				m.Results[2].Replicas[i].PeakRSSKiB = 45 << 10
			}
		}},
		{"slow settle", "settle <", Meshd, func(m *ScaleMatrix) {
			replica(m, Meshd, at, func(p *ReplicaReport) { p.Settle = 1200 * time.Millisecond })
		}},
		{"CPU over half client-go's", "CPU per replica", MeshdSession, func(m *ScaleMatrix) {
			for i := range m.Results[1].Replicas {
				m.Results[1].Replicas[i].CPU = testWindow * 3 / 100
			}
		}},
		{"a 5xx", "0 responses 5xx", Meshd, func(m *ScaleMatrix) {
			replica(m, Meshd, at, func(p *ReplicaReport) { p.ServerErrors = 1 })
		}},
		{"goroutines", "0 responses 5xx", MeshdSession, func(m *ScaleMatrix) {
			replica(m, MeshdSession, at, func(p *ReplicaReport) { p.Goroutines = 3001 })
		}},
		{"session sends a request per second", "session mode: under", MeshdSession, func(m *ScaleMatrix) {
			replica(m, MeshdSession, at, func(p *ReplicaReport) { p.Requests[VerbUpdate] += 17 })
		}},
		{"a follower request", "per-record mode", Meshd, func(m *ScaleMatrix) {
			replica(m, Meshd, large, func(p *ReplicaReport) {
				p.Requests[VerbGet]++
				p.FollowerRequests = Counts{VerbGet: 1}
			})
		}},
		{"a watch in the window", "per-record mode", Meshd, func(m *ScaleMatrix) {
			replica(m, Meshd, at, func(p *ReplicaReport) { p.Requests[VerbWatch]++ })
		}},
		{"a leader's get", "per-record mode", Meshd, func(m *ScaleMatrix) {
			replica(m, Meshd, at, func(p *ReplicaReport) { p.Requests[VerbGet]++; p.LeaderRequests[VerbGet]++ })
		}},
		{"a new term", "0 new terms", MeshdSession, func(m *ScaleMatrix) {
			replica(m, MeshdSession, large, func(p *ReplicaReport) { p.NewTerms = 1 })
		}},
		{"5000x3 did not settle", "5000x3 completes", Meshd, func(m *ScaleMatrix) {
			m.Results[3] = ScaleResult{Impl: Meshd, Cell: large, Err: "timed out", Unsettled: 5, UnsettledReplicas: 1}
		}},
		{"5000x3 lost leaders", "5000x3 completes", MeshdSession, func(m *ScaleMatrix) {
			replica(m, MeshdSession, large, func(p *ReplicaReport) { p.Leading = 0 })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := goodMatrix()
			tc.change(m)
			r := row(t, scaleSummary(t, m), tc.key)
			want := fmt.Sprintf("%s: **not met**", tc.bad)
			if tc.key == "per-record mode" || tc.key == "session mode: under" {
				want = "**not met**" // one mode, one verdict
			}
			if !strings.Contains(r[2], want) {
				t.Fatalf("verdict %q, want %q (measured %q)", r[2], want, r[1])
			}
			if strings.Count(r[2], "not met") != 1 {
				t.Fatalf("verdict %q: only %s should fail", r[2], tc.bad)
			}
		})
	}
}

func TestScaleTargetsNeedClientGo(t *testing.T) {
	m := goodMatrix()
	m.Results = m.Results[:2] // no client-go at 1000x3
	rows := scaleSummary(t, m)
	for _, key := range []string{"peak RSS", "CPU per replica"} {
		if r := row(t, rows, key); !strings.Contains(r[2], "meshd: **not met**") || !strings.Contains(r[1], "client-go not run") {
			t.Errorf("%q without client-go: %q / %q, want not met and why", key, r[1], r[2])
		}
	}
}

func TestScaleLines(t *testing.T) {
	cells, err := ParseCells(DefaultScaleCells)
	if err != nil {
		t.Fatal(err)
	}
	m := &ScaleMatrix{Cells: cells}
	var got []string
	for _, l := range m.lines() {
		var xs []string
		for _, c := range l.cells {
			xs = append(xs, fmt.Sprint(l.x(c)))
		}
		got = append(got, fmt.Sprintf("%s %s: %s", l.axis, l.fixed, strings.Join(xs, ",")))
	}
	want := []string{"elections at 3 replicas: 1,10,100,1000,5000", "replicas at 100 elections: 1,3,10"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	var order []string
	for _, c := range m.RunOrder() {
		order = append(order, c.Short())
	}
	if want := "1x3,10x3,100x1,100x3,100x10,1000x3,5000x3"; strings.Join(order, ",") != want {
		t.Errorf("run order %s, want %s", strings.Join(order, ","), want)
	}
	// A cell on no sweep still gets a table.
	m = &ScaleMatrix{Cells: []Cell{{10, 3}, {100, 3}, {7, 2}}}
	if n := len(m.lines()); n != 2 {
		t.Errorf("%d lines for 10x3,100x3,7x2, want 2", n)
	}
}

func TestParseCellsAndSkip(t *testing.T) {
	cells, err := ParseCells(" 1000x3, 5000X3 ")
	if err != nil || !reflect.DeepEqual(cells, []Cell{{1000, 3}, {5000, 3}}) {
		t.Errorf("ParseCells: %v, %v", cells, err)
	}
	for _, bad := range []string{"", "1000", "0x3", "10x-1", "axb", "10x3x2"} {
		if _, err := ParseCells(bad); err == nil {
			t.Errorf("ParseCells(%q) accepted", bad)
		}
	}
	skip, err := ParseSkip(DefaultScaleSkip)
	if err != nil || !reflect.DeepEqual(skip, map[Cell][]Impl{{5000, 3}: {MeshdPolling}}) {
		t.Errorf("ParseSkip(%q): %v, %v", DefaultScaleSkip, skip, err)
	}
	for _, bad := range []string{"meshd", "nosuch@10x3", "meshd@10"} {
		if _, err := ParseSkip(bad); err == nil {
			t.Errorf("ParseSkip(%q) accepted", bad)
		}
	}
}

func TestScaleReportShowsSkipsAndUnsettled(t *testing.T) {
	m := goodMatrix()
	m.Skip = map[Cell][]Impl{ScaleLargeCell: {MeshdPolling}}
	m.Results = append(m.Results, fakeScale(MeshdPolling, ScaleTargetCell, 60, 4, 15*time.Second))
	small := Cell{Elections: 100, Replicas: 3}
	m.Cells = append(m.Cells, small)
	m.Results = append(m.Results, fakeScale(Meshd, small, 30, 0.1, 50*time.Millisecond), fakeScale(MeshdSession, small, 30, 0.1, 50*time.Millisecond),
		fakeScale(ClientGo, small, 30, 0.5, 10*time.Second))
	var buf bytes.Buffer
	(&Results{Scale: m, ScaleTTL: 30 * time.Second, ScaleWindow: testWindow}).writeScale(&buf)
	out := buf.String()
	for _, want := range []string{
		"Cells (elections x replicas): 100x3, 1000x3, 5000x3, in this order; implementations meshd, meshd-session, meshd-polling, client-go, each in every cell except meshd-polling at 5000x3.",
		"| 5000      | ",
		"skipped",
		"not settled in 3m0s",
		"- client-go at 5000 elections x 3 replicas did not settle in 3m0s: 700 elections had no known leader in 3 of 3 replicas (peak RSS then 600.0 MiB).",
		"| 1000      | 133.3 / 0 / 0 | 0 / 0 / 0.40 ",
		// client-go has no figure at 5000: its growth ends at 1000.
		"| API request rate, all replicas                                 | elections 100 → 5000 at 3 replicas | 50.0x (k=1.00) | 1.00x (k=0.00) |           n/a | 100 → 1000: 10.0x (k=1.00) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestLeaseRequestSplit(t *testing.T) {
	for path, want := range map[string]string{
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/e0001": "e0001",
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases":       "",
		"/api/v1/namespaces/ns/configmaps/e0001":                  "",
	} {
		got, ok := leaseName(path)
		if got != want || ok != (want != "") {
			t.Errorf("leaseName(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
	start := map[string]Counts{"a": {VerbUpdate: 2}, "b": {VerbGet: 1}}
	stop := map[string]Counts{"a": {VerbUpdate: 5}, "b": {VerbGet: 3}, "c": {VerbUpdate: 1}, "hb": {VerbUpdate: 9}}
	leader, follower := splitByLeader(start, stop, map[string]bool{"a": true, "b": false, "c": false})
	if !reflect.DeepEqual(leader, Counts{VerbUpdate: 3}) || !reflect.DeepEqual(follower, Counts{VerbGet: 2, VerbUpdate: 1}) {
		t.Errorf("split: leaders %v, followers %v", leader, follower)
	}
}
