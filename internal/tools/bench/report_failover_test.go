package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A trial whose dead leader had a renewal in flight has no "last renew"
// figure; the report says how many, and the target's median and p99 come
// from the other trials only.
func TestFailoverReportLeavesOutAnUnknownLastRenew(t *testing.T) {
	r := &Results{Config: Config{TTL: 4 * time.Second, Trials: 3}, Failover: []TakeoverResult{{
		Impl: Meshd, Latency: millis(3500, 3900, 4006), SinceRenew: millis(4006, 4007), UnknownRenew: 1,
	}}}
	var buf bytes.Buffer
	r.WriteMarkdown(&buf)
	out := buf.String()
	if !strings.Contains(out, "meshd: 1 of 3 trials have no \"last renew\" figure") {
		t.Fatalf("the report does not say that one trial has no last-renew figure:\n%s", out)
	}
	var row string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "failover after a crash: LeaseDuration") {
			row = line
		}
	}
	if !strings.Contains(row, "LeaseDuration + 6") || !strings.Contains(row, "| met") {
		t.Fatalf("summary row %q: want the median of the two known trials, met", row)
	}
}
