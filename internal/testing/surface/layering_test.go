package surface

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/meshd-io/meshd"

// libraryInternal lists the internal packages the library in pkg/ may use:
// machinery it keeps out of its public surface. The daemon's controllers,
// the tools and the test harnesses are not among them.
var libraryInternal = []string{
	"internal/lockmeta", "internal/lockcap", "internal/lockwatch",
	"internal/protocol/", "internal/pacing", "internal/metrics/", "internal/ownstack",
	"internal/election/", "internal/electionlog", "internal/errlist", "internal/refcount",
}

func isLibraryInternal(rel string) bool {
	for _, p := range libraryInternal {
		if rel == strings.TrimSuffix(p, "/") || (strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p)) {
			return true
		}
	}
	return false
}

// importsOf returns the module-relative imports of the non-test files in
// dir that lie inside this module.
func importsOf(t *testing.T, root, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	have := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if rel, ok := strings.CutPrefix(path, modulePath+"/"); ok && !have[rel] {
				have[rel] = true
				out = append(out, rel)
			}
		}
	}
	return out
}

// The library's dependencies point one way: pkg/ reaches into internal/
// only for the machinery listed above, and nothing it reaches, directly or
// through that machinery, is cmd/, a tool, a controller or a test harness.
func TestLibraryImportsOnlyItsOwnMachinery(t *testing.T) {
	root := moduleRoot(t)
	var queue []string
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			queue = append(queue, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		if seen[dir] {
			continue
		}
		seen[dir] = true
		for _, imp := range importsOf(t, root, dir) {
			switch {
			case strings.HasPrefix(imp, "pkg/"):
			case strings.HasPrefix(imp, "internal/") && isLibraryInternal(imp):
			default:
				t.Errorf("%s imports %s, which the library must not depend on", dir, imp)
				continue
			}
			queue = append(queue, imp)
		}
	}
	if len(seen) < 10 {
		t.Fatalf("walked only %d packages; the walk is broken", len(seen))
	}
}
