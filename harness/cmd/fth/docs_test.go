package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// docsRoot is the repository root, relative to this package.
const docsRoot = "../../.."

// readDoc returns the lines of a file of the repository.
func readDoc(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(docsRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// tableCells splits a markdown table row into its trimmed cells; a pipe
// escaped as \| stays inside its cell. ok is false for a line that is not
// a row.
func tableCells(line string) (cells []string, ok bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil, false
	}
	const esc = "\x00"
	line = strings.ReplaceAll(line, `\|`, esc)
	for _, c := range strings.Split(line[1:len(line)-1], "|") {
		cells = append(cells, strings.TrimSpace(strings.ReplaceAll(c, esc, `\|`)))
	}
	return cells, true
}

// isRule reports whether cells are a table's header rule (|---|---|).
func isRule(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" {
			return false
		}
	}
	return true
}

// tableRows returns the rows of the table in lines whose header is
// header, the header and its rule left out.
func tableRows(t *testing.T, lines []string, header ...string) [][]string {
	t.Helper()
	for i, line := range lines {
		cells, ok := tableCells(line)
		if !ok || !slices.Equal(cells, header) {
			continue
		}
		var rows [][]string
		for _, l := range lines[i+1:] {
			c, ok := tableCells(l)
			if !ok {
				break
			}
			if !isRule(c) {
				rows = append(rows, c)
			}
		}
		return rows
	}
	t.Fatalf("no table with the header %q", strings.Join(header, " | "))
	return nil
}

// codeVerdicts returns the values of the constants of type Verdict that
// package results (its non-test files) defines.
func codeVerdicts(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	var out []string
	files, err := filepath.Glob(filepath.Join(docsRoot, "results", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Verdict" {
					continue
				}
				for i := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: verdict %s is not a string literal", fset.Position(vs.Pos()), vs.Names[i].Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, v)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("found no constant of type Verdict in results/: the test no longer reads the code")
	}
	return out
}

var leadingCode = regexp.MustCompile("^`([^`]+)`")

// Every verdict results/ defines has a row in docs/verdicts.md's table,
// and every verdict the table names is one the code has: the table is
// the one complete list.
func TestVerdictsDocumented(t *testing.T) {
	want := codeVerdicts(t)
	documented := map[string]bool{}
	for _, row := range tableRows(t, readDoc(t, "docs/verdicts.md"), "outcome", "verdict") {
		if len(row) != 2 {
			t.Errorf("docs/verdicts.md: row %q has %d cells, want 2", row, len(row))
			continue
		}
		// A verdict cell starts with the verdict in backticks; a row
		// without one (a board's network blip) gives none.
		m := leadingCode.FindStringSubmatch(row[1])
		if m == nil {
			continue
		}
		if !slices.Contains(want, m[1]) {
			t.Errorf("docs/verdicts.md: the row %q names the verdict %q, which results/ does not define (it has %v)", row[0], m[1], want)
		}
		documented[m[1]] = true
	}
	for _, v := range want {
		if !documented[v] {
			t.Errorf("docs/verdicts.md: the verdict %q, defined in results/, has no row in the outcome table", v)
		}
	}
}

// packageDirs returns every directory under the repository root holding
// a non-test .go file, relative to the root with forward slashes; testdata,
// vendor, hidden directories and the build outputs (out, bin) are left out.
func packageDirs(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(docsRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(docsRoot, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || rel == "out" || rel == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			seen[filepath.ToSlash(filepath.Dir(rel))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatal("found no Go package folder: the walk no longer reads the tree")
	}
	return out
}

// Every Go package folder has a row in docs/architecture.md's package
// table, and every row names a folder that exists.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	rows := tableRows(t, readDoc(t, "docs/architecture.md"), "path", "job")
	named := map[string]bool{}
	for _, row := range rows {
		m := leadingCode.FindStringSubmatch(row[0])
		if m == nil || len(row) != 2 || row[1] == "" {
			t.Errorf("docs/architecture.md: row %q is not `path` | job", row)
			continue
		}
		dir := strings.TrimSuffix(m[1], "/")
		if named[dir] {
			t.Errorf("docs/architecture.md: %s has two rows", dir)
		}
		named[dir] = true
		if fi, err := os.Stat(filepath.Join(docsRoot, dir)); err != nil || !fi.IsDir() {
			t.Errorf("docs/architecture.md names %s, which is not a folder of the repository", dir)
		}
	}
	for _, dir := range packageDirs(t) {
		if dir == "." {
			dir = "(the root)"
		}
		if !named[dir] {
			t.Errorf("docs/architecture.md: the package folder %s has no row in the package table (| `%s` | its job |)", dir, dir)
		}
	}
}

// README.md is a map: at most 200 lines, and no table cell over 300
// characters (the figures and their history belong to docs/).
func TestReadmeIsAMap(t *testing.T) {
	const maxLines, maxCell = 200, 300
	lines := readDoc(t, "README.md")
	if n := len(lines); lines[n-1] == "" {
		lines = lines[:n-1]
	}
	if len(lines) > maxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to docs/", len(lines), maxLines)
	}
	for i, line := range lines {
		cells, ok := tableCells(line)
		if !ok {
			continue
		}
		for _, c := range cells {
			if n := utf8.RuneCountInString(c); n > maxCell {
				t.Errorf("README.md:%d: a table cell of %d characters, more than %d: %.60q…", i+1, n, maxCell, c)
			}
		}
	}
}
