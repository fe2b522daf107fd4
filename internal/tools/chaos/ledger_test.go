package chaos

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshd-io/meshd/internal/ledger"
)

func TestParseLedgerLine(t *testing.T) {
	good := []string{
		`{"id":"1-2-3","event":"start","election":"e","holder":"a","mono":5}`,
		`{"id":"1-2-3","event":"stop","mono":6}`,
		` {"id":"x","event":"stop","mono":1} `,
	}
	for _, l := range good {
		if _, err := ParseLedgerLine([]byte(l)); err != nil {
			t.Errorf("ParseLedgerLine(%s): %v", l, err)
		}
	}
	bad := []string{
		``,
		`{`,
		`{"id":"x","event":"start","mono":5}`, // no election
		`{"id":"x","event":"stop","mono":0}`,  // no time
		`{"id":"x","event":"stop","mono":-1}`, // negative time
		`{"event":"stop","mono":1}`,           // no id
		`{"id":"x","event":"pause","mono":1}`, // unknown event
		`{"id":"x","event":"stop","mono":1,"extra":true}`,                    // unknown field
		`{"id":"x","event":"stop","mono":1} {}`,                              // trailing data
		`{"id":"x","event":"stop","mono":"1"}`,                               // wrong type
		`{"id":"x","event":"stop","mono":1e30}`,                              // out of range
		`{"id":"` + strings.Repeat("x", 5000) + `","event":"stop","mono":1}`, // too long
	}
	for _, l := range bad {
		if _, err := ParseLedgerLine([]byte(l)); err == nil {
			t.Errorf("ParseLedgerLine(%.60s) accepted", l)
		}
	}
}

// FuzzParseLedgerLine: no input panics, and what is accepted re-encodes to
// a line that parses to the same value.
func FuzzParseLedgerLine(f *testing.F) {
	f.Add([]byte(`{"id":"1-2-3","event":"start","election":"e","holder":"a","mono":5}`))
	f.Add([]byte(`{"id":"1-2-3","event":"stop","mono":6}`))
	f.Add([]byte(`{"id":"1","event":"stop","mono":9223372036854775807}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, line []byte) {
		l, err := ParseLedgerLine(line)
		if err != nil {
			return
		}
		again, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := ParseLedgerLine(again)
		if err != nil || l2 != l {
			t.Fatalf("re-encoded %s parses to %+v, %v; want %+v", again, l2, err, l)
		}
	})
}

// TestReadLedgersOfRealFiles writes ledgers with internal/ledger, as meshd
// does, and reads them back: a term without a stop ends when its process
// died, not at the last line of any file.
func TestReadLedgersOfRealFiles(t *testing.T) {
	dir := t.TempDir()
	pathA, pathB := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	a, err := ledger.OpenFile(pathA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ledger.OpenFile(pathB)
	if err != nil {
		t.Fatal(err)
	}
	// a runs a term and is "killed" during a second one.
	a.Wrap("e", "a", func(context.Context) { time.Sleep(5 * time.Millisecond) })(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	go a.Wrap("e", "a", func(ctx context.Context) { <-ctx.Done(); time.Sleep(time.Hour) })(ctx)
	time.Sleep(10 * time.Millisecond)
	death := Now()
	cancel()
	time.Sleep(10 * time.Millisecond)
	// b starts after a died.
	b.Wrap("e", "b", func(context.Context) { time.Sleep(5 * time.Millisecond) })(context.Background())
	b.Close()

	ivs, err := ReadLedgers(Now(), LedgerFile{Path: pathA, Holder: "a#1", End: death}, LedgerFile{Path: pathB, Holder: "b#1"},
		LedgerFile{Path: filepath.Join(dir, "never-written.jsonl"), Holder: "c#1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ivs) != 3 {
		t.Fatalf("intervals = %+v, want 3", ivs)
	}
	if ivs[1].Holder != "a#1" || !ivs[1].Open || ivs[1].Stop != death {
		t.Fatalf("killed term = %+v, want it to end at the death %d", ivs[1], death)
	}
	if o := Overlaps(ivs); len(o) != 0 {
		t.Fatalf("overlaps = %+v", o)
	}
	// Read as ledger.ReadFiles would, the killed term would run to b's last
	// line and overlap b's term.
	ivs, _ = ReadLedgers(Now(), LedgerFile{Path: pathA, Holder: "a#1"}, LedgerFile{Path: pathB, Holder: "b#1"})
	if o := Overlaps(ivs); len(o) != 1 {
		t.Fatalf("with the killed term left open: overlaps = %+v, want 1", o)
	}
}

func TestReadLedgersRejectsCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	start := `{"id":"1","event":"start","election":"e","holder":"a","mono":10}` + "\n"
	// A last line cut short (SIGKILL during a write) is tolerated.
	if _, err := ReadLedgers(100, LedgerFile{Path: write("cut.jsonl", start+`{"id":"1","ev`)}); err != nil {
		t.Fatalf("cut last line: %v", err)
	}
	for name, content := range map[string]string{
		"bad-middle.jsonl": `{"id":"1","ev` + "\n" + start,
		"dup.jsonl":        start + start,
		"backwards.jsonl":  start + `{"id":"1","event":"stop","mono":5}` + "\n",
	} {
		if _, err := ReadLedgers(100, LedgerFile{Path: write(name, content)}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestOverlapsAndGaps(t *testing.T) {
	ivs := []Interval{
		{Election: "e", Holder: "a", Start: 0, Stop: 100},
		{Election: "e", Holder: "b", Start: 100, Stop: 200}, // touches a
		{Election: "e", Holder: "c", Start: 150, Stop: 170}, // inside b
		{Election: "e", Holder: "b", Start: 300, Stop: 400},
		{Election: "e", Holder: "b", Start: 350, Stop: 360}, // same holder
		{Election: "f", Holder: "a", Start: 0, Stop: 1000},  // other election
	}
	o := Overlaps(ivs)
	if len(o) != 1 || o[0].A != "b" || o[0].B != "c" || o[0].Duration != 20 {
		t.Fatalf("Overlaps = %+v, want b/c for 20ns", o)
	}
	gaps := Gaps(ivs, "e", 500)
	if len(gaps) != 2 || gaps[0] != (Gap{"e", 200, 300}) || gaps[1] != (Gap{"e", 400, 500}) {
		t.Fatalf("Gaps = %+v", gaps)
	}
	if g := Gaps(ivs, "none", 500); g != nil {
		t.Fatalf("gaps of an election without terms = %+v", g)
	}
}
