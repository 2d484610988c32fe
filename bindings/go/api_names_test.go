package redquorum

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The receivers whose exported methods, and the option types whose constructors, make the
// client, request, lock and election surfaces of docs/api.md's names table.
var (
	apiReceivers = map[string]bool{"Client": true, "Request": true, "Lock": true, "Election": true, "Leadership": true}
	apiOptions   = map[string]bool{"RequestOption": true, "ElectionOption": true}
	apiFuncs     = map[string]bool{"New": true, "NewOwner": true, "NewRequest": true}
)

// goPublicNames lists Type.Name for each exported method of the surface's types, and the name
// of each package function that makes a client, a request or an option of one, by go/ast.
func goPublicNames(t *testing.T) map[string]bool {
	fset := token.NewFileSet()
	notTest := func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }
	pkgs, err := parser.ParseDir(fset, ".", notTest, 0)
	if err != nil {
		t.Fatalf("parsing the package: %v", err)
	}
	names := map[string]bool{}
	for _, pkg := range pkgs {
		for _, file := range pkg.Files {
			for _, decl := range file.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || !fn.Name.IsExported() {
					continue
				}
				if fn.Recv != nil {
					recv := fn.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					if id, ok := recv.(*ast.Ident); ok && apiReceivers[id.Name] {
						names[id.Name+"."+fn.Name.Name] = true
					}
					continue
				}
				result := ""
				if fn.Type.Results != nil && len(fn.Type.Results.List) == 1 {
					if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); ok {
						result = id.Name
					}
				}
				if apiOptions[result] || apiFuncs[fn.Name.Name] {
					names[fn.Name.Name] = true
				}
			}
		}
	}
	return names
}

// tableColumn lists the names in language's column of docs/api.md's names table, after
// checking that every cell holds names or a "—" exception with its reason.
func tableColumn(t *testing.T, language string) map[string]bool {
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatalf("reading docs/api.md: %v", err)
	}
	var section string
	for _, s := range strings.Split(string(text), "\n## ") {
		if strings.HasPrefix(s, "The names in each language") {
			section = s
		}
	}
	if section == "" {
		t.Fatal(`docs/api.md has no section "The names in each language"`)
	}
	names := map[string]bool{}
	column := -1
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == "concept" {
			column = -1
			for i, c := range cells {
				if c == language {
					column = i
				}
			}
			if column < 0 {
				t.Fatalf("a table of docs/api.md has no column %s", language)
			}
			continue
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		for i, cell := range cells[1:] {
			if reason, ok := strings.CutPrefix(cell, "—"); ok {
				if strings.TrimSpace(reason) == "" {
					t.Errorf("docs/api.md, row %q: an exception without its reason", cells[0])
				}
				continue
			}
			parts := strings.Split(cell, "`")
			if len(parts) < 3 {
				t.Errorf("docs/api.md, row %q: a cell with neither names nor an exception", cells[0])
			}
			if i+1 != column {
				continue
			}
			for j := 1; j < len(parts); j += 2 {
				names[parts[j]] = true
			}
		}
	}
	return names
}

func TestEveryPublicGoNameHasARowInTheNamesTable(t *testing.T) {
	public := goPublicNames(t)
	if !public["Client.Acquire"] {
		t.Fatalf("go/ast found no Client.Acquire: %v", public)
	}
	table := tableColumn(t, "Go")
	var missing, stale []string
	for n := range public {
		if !table[n] {
			missing = append(missing, n)
		}
	}
	for n := range table {
		if !public[n] {
			stale = append(stale, n)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Errorf(`docs/api.md, "The names in each language", column Go: public names in no row `+
			"(add a row, or the name to its concept's row, with the other languages' counterparts "+
			"or a `—` exception): %v; names in the table that are not public: %v", missing, stale)
	}
}
