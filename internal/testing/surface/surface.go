// Package surface measures the shape of the library that issue-level design
// targets are stated in: how many identifiers pkg/ exports, which of them
// lack a doc comment, how many code lines the elector core has, how many
// fields its state struct has and how long its functions are.
//
// The figures are computed from the source with go/parser, so anyone can
// reproduce them with `go test -v -run TestSurface ./internal/testing/surface`.
package surface

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Exported is one exported identifier: a top-level name, or a method of an
// exported type written as "Type.Method".
type Exported struct {
	Dir        string // package directory relative to the module root
	Name       string
	Documented bool
}

// goFiles returns the non-test Go files under dir, subdirectories included
// when recursive is set.
func goFiles(dir string, recursive bool) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (!recursive || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// ExportedIn lists the exported identifiers of the non-test files under
// root (module-relative paths are reported relative to base).
func ExportedIn(base, root string) ([]Exported, error) {
	files, err := goFiles(filepath.Join(base, root), true)
	if err != nil {
		return nil, err
	}
	var out []Exported
	for _, file := range files {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", file, err)
		}
		rel, _ := filepath.Rel(base, filepath.Dir(file))
		add := func(name string, doc ...*ast.CommentGroup) {
			documented := false
			for _, d := range doc {
				if d != nil && strings.TrimSpace(d.Text()) != "" {
					documented = true
				}
			}
			out = append(out, Exported{Dir: rel, Name: name, Documented: documented})
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					add(d.Name.Name, d.Doc)
					continue
				}
				recv := receiverName(d.Recv.List[0].Type)
				if ast.IsExported(recv) {
					add(recv+"."+d.Name.Name, d.Doc)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							add(s.Name.Name, s.Doc, d.Doc)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								add(n.Name, s.Doc, s.Comment, d.Doc)
							}
						}
					}
				}
			}
		}
	}
	return out, nil
}

func receiverName(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// CodeLines counts the lines of the non-test files directly in dir that are
// neither blank nor only a comment (a line inside a /* */ block counts as a
// comment).
func CodeLines(dir string) (int, error) {
	files, err := goFiles(dir, false)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return 0, err
		}
		inBlock := false
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			switch {
			case inBlock:
				if strings.Contains(line, "*/") {
					inBlock = false
				}
			case line == "", strings.HasPrefix(line, "//"):
			case strings.HasPrefix(line, "/*"):
				inBlock = !strings.Contains(line, "*/")
			default:
				n++
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// StructFields counts the fields of the named struct type declared in the
// non-test files directly in dir (embedded fields count once, a line of
// several names counts each name).
func StructFields(dir, typeName string) (int, error) {
	files, err := goFiles(dir, false)
	if err != nil {
		return 0, err
	}
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %w", file, err)
		}
		for _, decl := range f.Decls {
			d, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range d.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok || ts.Name.Name != typeName {
					continue
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return 0, fmt.Errorf("%s is not a struct", typeName)
				}
				n := 0
				for _, fld := range st.Fields.List {
					if len(fld.Names) == 0 {
						n++
					}
					n += len(fld.Names)
				}
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("type %s not found in %s", typeName, dir)
}

// Func is a function or method and its length in lines, from the line of
// "func" to the line of its closing brace.
type Func struct {
	Name  string
	Lines int
}

// FuncLengths lists the functions of the non-test files directly in dir,
// longest first.
func FuncLengths(dir string) ([]Func, error) {
	files, err := goFiles(dir, false)
	if err != nil {
		return nil, err
	}
	var out []Func
	for _, file := range files {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", file, err)
		}
		for _, decl := range f.Decls {
			d, ok := decl.(*ast.FuncDecl)
			if !ok || d.Body == nil {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil {
				name = receiverName(d.Recv.List[0].Type) + "." + name
			}
			lines := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
			out = append(out, Func{Name: name, Lines: lines})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Lines > out[j].Lines })
	return out, nil
}
