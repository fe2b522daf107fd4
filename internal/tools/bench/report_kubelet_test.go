package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestKubeletFailoverReport(t *testing.T) {
	fast := KubeletResult{Impl: Meshd, TTL: 30 * time.Second, Latency: millis(1010, 1012, 1014, 1020, 1090)}
	clientGo := KubeletResult{Impl: ClientGo, TTL: 30 * time.Second, Latency: millis(31000, 33000, 36000)}
	short := []KubeletResult{{Impl: Meshd, TTL: 4 * time.Second, Latency: millis(1011)}, {Impl: ClientGo, TTL: 4 * time.Second, Latency: millis(5000)}}
	for _, tc := range []struct {
		name    string
		meshd   KubeletResult
		verdict string
	}{
		{"under the report plus 100 ms", fast, "| met"},
		{"too slow", KubeletResult{Impl: Meshd, TTL: 30 * time.Second, Latency: millis(1200, 1300, 30000)}, "**not met**"},
		{"overlap", KubeletResult{Impl: Meshd, TTL: 30 * time.Second, Latency: millis(1010),
			Overlap: Overlap{Pairs: 1, Total: time.Second, Max: time.Second}}, "**not met**"},
		{"a trial failed", KubeletResult{Impl: Meshd, TTL: 30 * time.Second, Latency: millis(1010), Errors: []string{"timed out"}}, "**not met**"},
		{"no trial succeeded", KubeletResult{Impl: Meshd, TTL: 30 * time.Second, Errors: []string{"timed out"}}, "**not met**"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Results{Config: Config{TTL: 4 * time.Second, Trials: 5}, Kubelet: append(append([]KubeletResult{}, short...), tc.meshd, clientGo)}
			var buf bytes.Buffer
			r.WriteMarkdown(&buf)
			out := buf.String()
			var row string
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "failover after a kubelet-reported crash") {
					row = line
				}
			}
			if !strings.Contains(row, tc.verdict) {
				t.Fatalf("summary row %q, want verdict %q", row, tc.verdict)
			}
			if !strings.Contains(row, "ttl 30s") || !strings.Contains(row, "under 1.1s") || !strings.Contains(row, "client-go 33000 ms") {
				t.Fatalf("summary row %q lacks the ttl, the target or client-go's median", row)
			}
			if !strings.Contains(out, "### Failover after a crash reported by the kubelet") {
				t.Fatal("no kubelet failover table")
			}
		})
	}
	var buf bytes.Buffer
	(&Results{Kubelet: append(short, fast, clientGo)}).writeKubelet(&buf)
	want := map[string][]string{
		"| 30s | meshd ":     {"1014 ms", "1090 ms", " 0 ms ", " 5 |"},
		"| 30s | client-go ": {"33000 ms", "36000 ms", " 3 |"},
		"| 4s  | meshd ":     {"1011 ms"},
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		for prefix, cells := range want {
			if !strings.HasPrefix(line, prefix) {
				continue
			}
			for _, cell := range cells {
				if !strings.Contains(line, cell) {
					t.Errorf("row %q lacks %q", line, cell)
				}
			}
			delete(want, prefix)
		}
	}
	if len(want) > 0 {
		t.Fatalf("rows missing %v in:\n%s", want, buf.String())
	}
	// Without a ttl-30s meshd result there is no summary row.
	buf.Reset()
	(&Results{Config: Config{TTL: 4 * time.Second}, Kubelet: short}).WriteMarkdown(&buf)
	if strings.Contains(buf.String(), "failover after a kubelet-reported crash") {
		t.Fatal("a summary row without a measurement at the target's ttl")
	}
}
