package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestForcedStealReport(t *testing.T) {
	fenced := ForcedResult{Impl: Meshd, Write: millis(4, 6), Start: millis(3600, 3700), Stop: millis(2600, 2700)}
	atOnce := ForcedResult{Impl: MeshdPolling, Write: millis(7, 7), Start: millis(7, 8), Stop: millis(2100, 2200),
		Overlap: Overlap{Pairs: 2, Total: 4300 * time.Millisecond, Max: 2200 * time.Millisecond}}
	for _, tc := range []struct {
		name    string
		meshd   ForcedResult
		verdict string
	}{
		{"fenced start without overlap", fenced, "| met"},
		{"overlap", ForcedResult{Impl: Meshd, Start: millis(5), Overlap: Overlap{Pairs: 1, Total: time.Second, Max: time.Second}}, "**not met**"},
		{"no trial succeeded", ForcedResult{Impl: Meshd, Errors: []string{"timed out"}}, "**not met**"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Results{Config: Config{TTL: 4 * time.Second, Trials: 2}, Forced: []ForcedResult{tc.meshd, atOnce}}
			var buf bytes.Buffer
			r.WriteMarkdown(&buf)
			out := buf.String()
			var row string
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "forced steal from a holder that does not cooperate") {
					row = line
				}
			}
			if !strings.Contains(row, tc.verdict) {
				t.Fatalf("summary row %q, want verdict %q", row, tc.verdict)
			}
			if !strings.Contains(row, "meshd-polling (starts at once, as istiod): 2 steals, 4300 ms total, 2200 ms max (2 pairs)") {
				t.Fatalf("summary row %q lacks meshd-polling's overlap", row)
			}
			if !strings.Contains(out, "### Forced steal from a holder that does not cooperate") {
				t.Fatal("no forced-steal table")
			}
		})
	}
	var buf bytes.Buffer
	(&Results{Config: Config{TTL: 4 * time.Second}, Forced: []ForcedResult{fenced, atOnce}}).writeForced(&buf)
	for _, line := range strings.Split(buf.String(), "\n") {
		if !strings.HasPrefix(line, "| meshd ") {
			continue
		}
		for _, cell := range []string{"at the fence", "5.00 ms / 6.00 ms", "3650 ms / 3700 ms", "2650 ms / 2700 ms", " 0 ms ", " 2 |"} {
			if !strings.Contains(line, cell) {
				t.Fatalf("meshd's row %q lacks %q", line, cell)
			}
		}
		return
	}
	t.Fatalf("no row for meshd:\n%s", buf.String())
}
