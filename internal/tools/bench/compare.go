package bench

import (
	"fmt"
	"io"
	"strings"
)

// Report is what a comparison reads of a benchmark report: the key-value
// table at its head (command, date, run time, ...) and the rows of its
// Summary (target and measured figures), in their order.
type Report struct {
	Head    [][2]string
	Summary [][2]string
}

// ParseReport reads a report written by this package (or by an earlier
// version of it: the layout has stayed a key-value table before "##
// Summary" and a target | measured | verdict table after it). It returns
// an error when either table is missing, so that a comparison never shows
// an empty column for a report it could not read.
func ParseReport(md string) (Report, error) {
	var r Report
	head, summary, found := strings.Cut(md, "\n## Summary\n")
	if !found {
		return r, fmt.Errorf("no Summary section")
	}
	for _, row := range tableRows(head) {
		if len(row) >= 2 && row[0] != "" {
			r.Head = append(r.Head, [2]string{row[0], row[1]})
		}
	}
	if next := strings.Index(summary, "\n## "); next >= 0 {
		summary = summary[:next]
	}
	for _, row := range tableRows(summary) {
		if len(row) >= 2 && row[0] != "target" {
			r.Summary = append(r.Summary, [2]string{row[0], row[1]})
		}
	}
	if len(r.Head) == 0 || len(r.Summary) == 0 {
		return r, fmt.Errorf("found %d head rows and %d summary rows; want both", len(r.Head), len(r.Summary))
	}
	return r, nil
}

// tableRows returns the cells of every Markdown table row in text, without
// the separator rows.
func tableRows(text string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
			continue
		}
		cells := splitCells(line[1 : len(line)-1])
		if isSeparator(cells) {
			continue
		}
		rows = append(rows, cells)
	}
	return rows
}

// splitCells splits a row's inside at the bars that are not escaped.
func splitCells(s string) []string {
	var cells []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '|':
			b.WriteString(`\|`)
			i++
		case s[i] == '|':
			cells = append(cells, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(s[i])
		}
	}
	return append(cells, strings.TrimSpace(b.String()))
}

func isSeparator(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-:") != "" || c == "" {
			return false
		}
	}
	return true
}

// Side is one of the two runs of a comparison.
type Side struct {
	Name   string // the column's title: a commit and its subject
	Report Report
}

// WriteComparison writes the two runs' head tables and Summary rows side
// by side: rows in base's order, then the rows only head has; a target one
// run does not have reads "not in this run".
func WriteComparison(w io.Writer, base, head Side) {
	writeSideBySide(w, "", base.Name, head.Name, base.Report.Head, head.Report.Head)
	fmt.Fprintln(w, "## Summary, side by side")
	fmt.Fprintln(w)
	writeSideBySide(w, "target", base.Name, head.Name, base.Report.Summary, head.Report.Summary)
}

func writeSideBySide(w io.Writer, first, baseName, headName string, base, head [][2]string) {
	t := newTable(first, baseName, headName)
	t.right = []bool{false, false, false}
	headValue := map[string]string{}
	for _, kv := range head {
		headValue[kv[0]] = kv[1]
	}
	seen := map[string]bool{}
	for _, kv := range base {
		seen[kv[0]] = true
		t.add(kv[0], kv[1], valueOr(headValue, kv[0]))
	}
	for _, kv := range head {
		if !seen[kv[0]] {
			t.add(kv[0], notInRun, kv[1])
		}
	}
	t.write(w)
}

const notInRun = "not in this run"

func valueOr(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return notInRun
}
