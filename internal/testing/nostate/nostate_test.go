// Package nostate checks that the election library keeps no state of its
// own at package level: what elections share is an object the program
// creates and passes in (election.Shared), so that two elections in one
// process affect each other only through what they were given, and a test
// can build two independent worlds.
package nostate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// checkedTrees are the directories, relative to the module root, whose
// non-test Go files (subdirectories included) may declare no package-level
// variable but the kinds allowed by allowedVar.
var checkedTrees = []string{"pkg/election", "pkg/resourcelock", "pkg/revisions", "internal/election", "internal/protocol"}

// immutable are the package-level variables, by "<dir>.<name>", that hold
// values fixed at initialisation and never assigned or changed afterwards,
// with the reason each is kept. Anything that can change (a map, a cache, a
// counter, a limiter, a sync.Once) must not be here: make it a field of an
// object the program passes in.
var immutable = map[string]string{
	"pkg/resourcelock.leaseKind": "a kind adapter: names and functions that map the record onto a Lease; " +
		"copied by value into every lock, never assigned after init",
	"pkg/resourcelock.configMapKind": "a kind adapter: names and functions that map the record onto a ConfigMap; " +
		"copied by value into every lock, never assigned after init",
}

// TestNoPackageLevelMutableState fails on every package-level var of the
// checked trees that is not a sentinel error (errors.New or fmt.Errorf), a
// blank assertion (var _ Iface = ...) or an entry of immutable; and on every
// entry of immutable that no longer exists.
func TestNoPackageLevelMutableState(t *testing.T) {
	root := moduleRoot(t)
	found, problems := scan(t, root)
	for _, p := range problems {
		t.Error(p)
	}
	for name := range immutable {
		if !found[name] {
			t.Errorf("immutable lists %s, which no longer exists: remove it", name)
		}
	}
}

// TestScanFindsMutableState keeps the check honest: on a package written
// for the purpose it reports the mutable variables and nothing else.
func TestScanFindsMutableState(t *testing.T) {
	dir := t.TempDir()
	src := `package demo

import (
	"errors"
	"fmt"
	"sync"
)

var ErrGone = errors.New("gone")

var ErrWrapped = fmt.Errorf("wrapped: %w", ErrGone)

var _ fmt.Stringer = (*thing)(nil)

var registry = map[string]int{}

var (
	mu    sync.Mutex
	count int
	_     = fmt.Sprint
)

var once = sync.OnceValue(func() string { return "x" })

type thing struct{}

func (*thing) String() string { return "" }
`
	if err := os.MkdirAll(filepath.Join(dir, "pkg", "election"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pkg", "election", "demo.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// A test file may keep what it likes.
	if err := os.WriteFile(filepath.Join(dir, "pkg", "election", "demo_test.go"), []byte("package demo\n\nvar scratch = map[int]int{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, problems := scan(t, dir)
	var names []string
	for _, p := range problems {
		names = append(names, p[strings.LastIndex(p, " ")+1:])
	}
	sort.Strings(names)
	if got, want := strings.Join(names, ","), "count,mu,once,registry"; got != want {
		t.Fatalf("reported %q, want %q; problems:\n%s", got, want, strings.Join(problems, "\n"))
	}
}

// scan parses the non-test Go files of the checked trees under root. It
// returns the "<dir>.<name>" of every package-level variable found and a
// problem for each one not allowed.
func scan(t *testing.T, root string) (found map[string]bool, problems []string) {
	t.Helper()
	found = map[string]bool{}
	fset := token.NewFileSet()
	for _, tree := range checkedTrees {
		base := filepath.Join(root, filepath.FromSlash(tree))
		if _, err := os.Stat(base); os.IsNotExist(err) {
			continue // a tree a fixture does not have
		}
		err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			dir := filepath.ToSlash(rel)
			for _, decl := range file.Decls {
				gen, ok := decl.(*ast.GenDecl)
				if !ok || gen.Tok != token.VAR {
					continue
				}
				for _, spec := range gen.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if name.Name == "_" {
							continue // a compile-time assertion
						}
						key := dir + "." + name.Name
						found[key] = true
						if _, ok := immutable[key]; ok {
							continue
						}
						if i < len(vs.Values) && len(vs.Names) == len(vs.Values) && sentinelError(vs.Values[i]) {
							continue
						}
						problems = append(problems, fset.Position(name.Pos()).String()+": package-level variable "+name.Name)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("scan %s: %v", tree, err)
		}
	}
	return found, problems
}

// sentinelError reports whether e is errors.New(...) or fmt.Errorf(...).
func sentinelError(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	return pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf"
}

// moduleRoot is the directory of the go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
