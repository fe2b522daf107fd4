package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func msList(v ...float64) Durations {
	var d Durations
	for _, x := range v {
		d = append(d, time.Duration(x*float64(time.Millisecond)))
	}
	return d
}

// line returns the first line of out that contains every one of parts.
func line(out string, parts ...string) string {
	for _, l := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return l
		}
	}
	return ""
}

func TestFloorReport(t *testing.T) {
	floor := &FloorResult{Update: msList(3, 3, 3), Watched: msList(3.2, 3.2, 3.2), Relay: msList(6, 6, 6)}
	released := TakeoverResult{Impl: Meshd, Latency: msList(8, 8, 9), Relayed: msList(8, 8, 9)}
	for _, tc := range []struct {
		name     string
		handover TakeoverResult
		floor    *FloorResult
		steal    []StealResult
		verdict  string
		rows     [][]string
	}{
		{name: "released, within 1.5x of the release-then-acquire floor", handover: released, floor: floor, verdict: "| met",
			rows: [][]string{{"graceful release, the successor wrote", "release-then-acquire", "6.00 ms", "1.33x"}}},
		{name: "released, over 1.5x", handover: TakeoverResult{Impl: Meshd, Latency: msList(10, 10), Relayed: msList(10, 10)},
			floor: floor, verdict: "**not met**", rows: [][]string{{"graceful release, the successor wrote", "1.67x"}}},
		{name: "named successors against the one-write floor, released ones against the other", floor: floor, verdict: "| met",
			handover: TakeoverResult{Impl: Meshd, Latency: msList(4, 4, 8), Named: msList(4, 4), Relayed: msList(8)},
			rows: [][]string{
				{"successor named by the releasing holder", "one-write", "3.20 ms", "1.25x"},
				{"graceful release, the successor wrote", "release-then-acquire", "1.33x"},
			}},
		{name: "a slow priority handover is reported but is not the graceful target", handover: released, floor: floor, verdict: "| met",
			steal: []StealResult{{Impl: Meshd, Start: msList(19.6), Stop: msList(10), Done: msList(19.6), Relay: msList(9.6)}},
			rows:  [][]string{{"priority handover on request", "one-write", "9.60 ms", "3.00x"}}},
		{name: "no trial succeeded", handover: TakeoverResult{Impl: Meshd, Errors: []string{"timed out"}}, floor: floor, verdict: "**not met**"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Results{Config: Config{TTL: 4 * time.Second, Trials: 3}, Handover: []TakeoverResult{tc.handover}, Floor: tc.floor, Steal: tc.steal}
			var buf bytes.Buffer
			r.WriteMarkdown(&buf)
			out := buf.String()
			row := line(out, "within 1.5x of the API server's floor")
			if !strings.Contains(row, tc.verdict) {
				t.Fatalf("summary row %q, want verdict %q", row, tc.verdict)
			}
			for _, want := range tc.rows {
				if line(out, want...) == "" {
					t.Errorf("no line with %q in:\n%s", want, out)
				}
			}
			if line(out, "one UPDATE (round trip)", "3.00 ms") == "" {
				t.Errorf("the floor table is missing:\n%s", out)
			}
		})
	}
}

func TestFloorReportWithoutFloor(t *testing.T) {
	r := &Results{Config: Config{TTL: 4 * time.Second, Trials: 3}, Handover: []TakeoverResult{{Impl: Meshd, Latency: msList(8)}}}
	var buf bytes.Buffer
	r.WriteMarkdown(&buf)
	if out := buf.String(); strings.Contains(out, "floor") {
		t.Fatalf("a report without a floor measurement mentions one:\n%s", out)
	}
}
