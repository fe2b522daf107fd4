package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestHandoverLegsSplitAReleasedHandover(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	relayed := []Step{
		{at(0), "c1", "cancelled (the handover begins)"},
		{at(50), "c1", stepRunReturned},
		{at(300), "c1", "update leases/l sent"},
		{at(3300), "c0", "watch received 4 bytes"},
		{at(3350), "c2", "watch received 4 bytes"},
		{at(3500), "c0", "update leases/l sent"}, // the loser
		{at(3550), "c2", "update leases/l sent"},
		{at(3600), "c1", "update leases/l answered (200)"},
		{at(6000), "c0", "update leases/l answered (409)"},
		{at(6550), "c2", "update leases/l answered (200)"},
		{at(6700), "c2", stepRunStarted},
	}
	named := []Step{
		{at(0), "c1", "cancelled (the handover begins)"},
		{at(300), "c1", "update leases/l sent"},
		{at(3300), "c2", "watch received 4 bytes"},
		{at(3400), "c2", stepRunStarted},
		{at(9000), "c2", "update leases/l sent"}, // its first renewal
		{at(12000), "c2", "update leases/l answered (200)"},
	}
	for _, tc := range []struct {
		name  string
		steps []Step
		next  string
		want  Legs
		ok    bool
	}{
		{"the successor wrote", relayed, "c2", Legs{Release: 300 * time.Microsecond, Seen: 3050 * time.Microsecond,
			React: 200 * time.Microsecond, Acquire: 3000 * time.Microsecond, Start: 150 * time.Microsecond}, true},
		{"the loser is no successor", relayed, "c0", Legs{}, false},
		{"named, the successor did not write", named, "c2", Legs{}, false},
		{"no successor known", relayed, "", Legs{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &Timeline{}
			for _, s := range tc.steps {
				tl.AddAt(s.At, s.Who, s.What)
			}
			got, ok := tl.HandoverLegs(t0, "c1", tc.next)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("HandoverLegs = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			if ok && got.Own() != 650*time.Microsecond {
				t.Errorf("Own = %v, want 650µs", got.Own())
			}
		})
	}
}

func TestWriteLegsPrintsTheMedians(t *testing.T) {
	var buf bytes.Buffer
	writeLegs(&buf, "handover meshd", nil)
	if buf.Len() != 0 {
		t.Fatalf("without legs: %q, want nothing", buf.String())
	}
	ms := time.Millisecond
	writeLegs(&buf, "handover meshd", []Legs{
		{Release: ms, Seen: 3 * ms, React: ms, Acquire: 3 * ms, Start: ms},
		{Release: 2 * ms, Seen: 4 * ms, React: 2 * ms, Acquire: 4 * ms, Start: 2 * ms},
		{Release: 9 * ms, Seen: 9 * ms, React: 9 * ms, Acquire: 9 * ms, Start: 9 * ms},
	})
	for _, want := range []string{"handover meshd, legs of 3 released handovers", "cancel -> release sent 2.000 ms", "-> answered 4.000 ms", "meshd's own share 6.000 ms"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%q lacks %q", buf.String(), want)
		}
	}
}
