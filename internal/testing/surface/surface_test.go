package surface

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The targets of the design (docs/design.md) and the ceilings the tree has
// reached so far. A ceiling may only go down: lower it in the commit that
// shrinks the figure, so that no later change grows the surface back
// unnoticed. Once a ceiling reaches its target the two are the same.
const (
	targetExported   = 160
	ceilingExported  = 157
	targetCoreLines  = 1500
	ceilingCoreLines = 1490
	targetCoreFields = 15
	ceilingFields    = 13
	targetFuncLines  = 50
	ceilingFuncLines = 45
)

const (
	coreDir    = "pkg/election/elector"
	coreStruct = "LeaderElector"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestSurface(t *testing.T) {
	root := moduleRoot(t)
	exported, err := ExportedIn(root, "pkg")
	if err != nil {
		t.Fatal(err)
	}
	perDir := map[string]int{}
	var undocumented []string
	for _, e := range exported {
		perDir[e.Dir]++
		if !e.Documented {
			undocumented = append(undocumented, e.Dir+"."+e.Name)
		}
	}
	dirs := make([]string, 0, len(perDir))
	for d := range perDir {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		t.Logf("%4d exported in %s", perDir[d], d)
	}
	t.Logf("%4d exported in pkg/ (target %d)", len(exported), targetExported)
	if len(exported) > ceilingExported {
		t.Errorf("pkg/ exports %d identifiers, above the ceiling of %d (target %d)", len(exported), ceilingExported, targetExported)
	}
	if len(undocumented) > 0 {
		t.Errorf("exported identifiers without a doc comment: %s", strings.Join(undocumented, ", "))
	}

	lines, err := CodeLines(filepath.Join(root, coreDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%4d code lines in %s (target %d)", lines, coreDir, targetCoreLines)
	if lines > ceilingCoreLines {
		t.Errorf("%s has %d code lines, above the ceiling of %d (target %d)", coreDir, lines, ceilingCoreLines, targetCoreLines)
	}

	fields, err := StructFields(filepath.Join(root, coreDir), coreStruct)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%4d fields in %s (target %d)", fields, coreStruct, targetCoreFields)
	if fields > ceilingFields {
		t.Errorf("%s has %d fields, above the ceiling of %d (target %d)", coreStruct, fields, ceilingFields, targetCoreFields)
	}

	funcs, err := FuncLengths(filepath.Join(root, coreDir))
	if err != nil {
		t.Fatal(err)
	}
	over := 0
	for _, f := range funcs {
		if f.Lines > targetFuncLines {
			over++
			t.Logf("%4d lines: %s", f.Lines, f.Name)
		}
	}
	t.Logf("%4d functions in %s over %d lines", over, coreDir, targetFuncLines)
	if len(funcs) > 0 && funcs[0].Lines > ceilingFuncLines {
		t.Errorf("%s is %d lines long, above the ceiling of %d (target %d)", funcs[0].Name, funcs[0].Lines, ceilingFuncLines, targetFuncLines)
	}
}
