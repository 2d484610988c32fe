package redquorum_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestReadmeGoIsCompiled: the Go of the READMEs (this module's and the repository's) is
// compiled code. Every ```go block is a run of consecutive lines of an Example function of
// example_test.go (a leading import line aside), so an API change that breaks a README
// example breaks the build of the examples, and an example changed without its README fails
// here.
func TestReadmeGoIsCompiled(t *testing.T) {
	bodies := exampleBodies(t, "example_test.go")
	for _, readme := range []string{"README.md", "../../README.md"} {
		blocks := goBlocks(t, readme)
		if len(blocks) == 0 {
			t.Errorf("%s has no Go block", readme)
		}
		for line, block := range blocks {
			if !slices.ContainsFunc(bodies, func(body []string) bool { return containsRun(body, block) }) {
				t.Errorf("%s:%d: this Go block is not part of an Example function of example_test.go:\n%s",
					readme, line, strings.Join(block, "\n"))
			}
		}
	}
}

// exampleBodies returns the lines of each Example function's body, one tab of indentation
// removed.
func exampleBodies(t *testing.T, path string) [][]string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var bodies [][]string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "Example") {
			continue
		}
		body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
		var lines []string
		for _, line := range strings.Split(strings.Trim(body, "\n"), "\n") {
			lines = append(lines, strings.TrimPrefix(line, "\t"))
		}
		bodies = append(bodies, lines)
	}
	if len(bodies) == 0 {
		t.Fatalf("%s has no Example function", path)
	}
	return bodies
}

// goBlocks returns the ```go blocks of a Markdown file by the line they start on, without
// a leading import line and the blank lines after it.
func goBlocks(t *testing.T, path string) map[int][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blocks := map[int][]string{}
	start := 0 // the line of the open block's fence; 0 outside a block
	scanner := bufio.NewScanner(f)
	for n := 1; scanner.Scan(); n++ {
		line := strings.TrimRight(scanner.Text(), " ")
		switch {
		case start == 0 && line == "```go":
			start = n
			blocks[start] = nil
		case start != 0 && line == "```":
			start = 0
		case start != 0 && len(blocks[start]) == 0 && (line == "" || strings.HasPrefix(line, "import ")):
		case start != 0:
			blocks[start] = append(blocks[start], line)
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// containsRun reports whether run is a run of consecutive lines of lines.
func containsRun(lines, run []string) bool {
	for i := 0; i+len(run) <= len(lines); i++ {
		if slices.Equal(lines[i:i+len(run)], run) {
			return true
		}
	}
	return false
}
