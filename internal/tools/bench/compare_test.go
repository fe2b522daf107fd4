package bench

import (
	"os"
	"strings"
	"testing"
)

const baseReport = `# Benchmarks

| | |
| --- | --- |
| command | ` + "`go run ./internal/tools/cmd/bench`" + ` |
| run time | 33m21s |

## Summary

Some words.

| target | measured | verdict |
| --- | --- | --- |
| handover | meshd 7.19 ms | met |
| a \| b | x | met |
| gone later | 1 | met |

## Handover

| implementation | median |
| --- | ---: |
| meshd | 7.19 ms |
`

const headReport = `# Benchmarks

| | |
| --- | --- |
| command | ` + "`go run ./internal/tools/cmd/bench`" + ` |
| run time | 30m2s |

## Summary

| target | measured | verdict |
| --- | --- | --- |
| new target | 2 | met |
| handover | meshd 6.90 ms | met |
| a \| b | y | met |
`

// The comparison puts each target's two figures on one row, keeps the
// base's order, adds the targets only the head measures, and says which
// run lacks a target; it reads no table after the Summary as part of it.
func TestComparisonSideBySide(t *testing.T) {
	base, err := ParseReport(baseReport)
	if err != nil {
		t.Fatal(err)
	}
	head, err := ParseReport(headReport)
	if err != nil {
		t.Fatal(err)
	}
	if len(base.Summary) != 3 || len(head.Summary) != 3 {
		t.Fatalf("summary rows: base %v, head %v", base.Summary, head.Summary)
	}
	var b strings.Builder
	WriteComparison(&b, Side{"base", base}, Side{"head", head})
	got := strings.Join(strings.Fields(b.String()), " ") // padding aside
	for _, want := range []string{
		"| run time | 33m21s | 30m2s",
		"| handover | meshd 7.19 ms | meshd 6.90 ms |",
		`| a \| b | x | y |`,
		"| gone later | 1 | not in this run |",
		"| new target | not in this run | 2 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the comparison lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(got, "implementation") {
		t.Errorf("a table after the Summary was read as part of it:\n%s", got)
	}
	if strings.Index(got, "| handover") > strings.Index(got, "| gone later") || strings.Index(got, "| gone later") > strings.Index(got, "| new target") {
		t.Errorf("rows are not in the base's order, then the head's own:\n%s", got)
	}
}

// A report without a Summary, or with an empty one, is an error rather
// than an empty column.
func TestComparisonRefusesAReportItCannotRead(t *testing.T) {
	for _, md := range []string{"", "# Benchmarks\n\n| command | x |\n", "# B\n\n| command | x |\n\n## Summary\n\nnothing\n"} {
		if _, err := ParseReport(md); err == nil {
			t.Errorf("ParseReport(%q) accepted a report without summary rows", md)
		}
	}
}

// The report make bench writes parses: every Summary row is read.
func TestComparisonReadsTheCommittedReport(t *testing.T) {
	md, err := os.ReadFile("../../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseReport(string(md))
	if err != nil {
		t.Fatal(err)
	}
	summary, _, _ := strings.Cut(strings.SplitN(string(md), "\n## Summary\n", 2)[1], "\n## ")
	want := strings.Count(summary, "\n| ") - 2 // less the header and separator rows
	if len(r.Summary) != want {
		t.Errorf("read %d summary rows, the report has %d", len(r.Summary), want)
	}
}
