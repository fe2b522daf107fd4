package ledger

import (
	"testing"
	"time"
)

func TestOverlaps(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := &Ledger{intervals: []Interval{
		{Election: "e", Holder: "a", Start: at(0), Stop: at(100)},
		{Election: "e", Holder: "b", Start: at(100), Stop: at(200)}, // touches a: no overlap
		{Election: "e", Holder: "c", Start: at(150), Stop: at(170)}, // 20ms inside b
		{Election: "e", Holder: "b", Start: at(300), Stop: at(400)},
		{Election: "other", Holder: "a", Start: at(0), Stop: at(400)}, // other election
		{Election: "e", Holder: "b", Start: at(350), Stop: at(360)},   // same holder
	}}
	got := l.Overlaps()
	if len(got) != 1 || got[0].A != "b" || got[0].B != "c" || got[0].Duration != 20*time.Millisecond {
		t.Fatalf("Overlaps = %+v, want one of 20ms between b and c", got)
	}
	if l.TotalOverlap() != 20*time.Millisecond || l.Starts("e") != 5 {
		t.Fatalf("TotalOverlap %v, Starts %d", l.TotalOverlap(), l.Starts("e"))
	}
}
