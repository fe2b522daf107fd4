package election

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeSnippetIsExampleNew keeps the README's embedding snippet equal
// to the body of ExampleNew, which go test compiles and runs.
func TestReadmeSnippetIsExampleNew(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Embedding an election\n\n```go\n")
	snippet, _, closed := strings.Cut(section, "```\n")
	if !ok || !closed {
		t.Fatal("README has no Go block under \"## Embedding an election\"")
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(example), "func ExampleNew() {\n")
	body, _, ended := strings.Cut(body, "\t// Output:")
	if !ok || !ended {
		t.Fatal("example_test.go has no ExampleNew with an Output comment")
	}
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	if want := strings.Join(lines, "\n"); snippet != want {
		t.Fatalf("README snippet differs from ExampleNew's body.\nREADME:\n%s\nExampleNew:\n%s", snippet, want)
	}
}
