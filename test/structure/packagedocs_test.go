package structure

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// productDirs hold the product packages: each says what it holds and why in a doc.go.
var productDirs = []string{"internal", "etcdclient", "tls", "cmd"}

// architectureDoc is the map of the packages, one table row each.
const architectureDoc = "docs/architecture.md"

// pkgDoc is what the docs rules need of one package.
type pkgDoc struct {
	// Name is the package clause's name.
	Name string
	// HasDocGo: the package has a doc.go. DocGo is its package comment ("" when it has none) and
	// DocGoExtra what else it holds besides the comment and the package clause.
	HasDocGo   bool
	DocGo      string
	DocGoExtra []string
	// Elsewhere are the other non-test files of the package that carry a package comment.
	Elsewhere []string
}

// docsModel is the product packages' comments and the rows of docs/architecture.md.
type docsModel struct {
	// product are the product packages by path below the module.
	product map[string]pkgDoc
	// packages are every package of the module by path below it; mapped are those that need a
	// row: every package outside test/.
	packages map[string]bool
	mapped   []string
	// rows are the first cells of the map's package rows, in order.
	rows []string
}

func (m docsModel) clone() docsModel {
	c := m
	c.product = maps.Clone(m.product)
	c.packages = maps.Clone(m.packages)
	c.mapped = slices.Clone(m.mapped)
	c.rows = slices.Clone(m.rows)
	return c
}

func (m docsModel) sortedProduct() []string { return slices.Sorted(maps.Keys(m.product)) }

func isProduct(name string) bool {
	return slices.ContainsFunc(productDirs, func(d string) bool { return under(name, d) })
}

type listedPackage struct {
	ImportPath                        string
	Name                              string
	Dir                               string
	GoFiles, CgoFiles, IgnoredGoFiles []string
}

func readDocsModel(t *testing.T) docsModel {
	t.Helper()
	root := repoRoot(t)
	m := docsModel{product: map[string]pkgDoc{}, packages: map[string]bool{}}
	for _, p := range goList[listedPackage](t, "ImportPath,Name,Dir,GoFiles,CgoFiles,IgnoredGoFiles") {
		name := strings.TrimPrefix(p.ImportPath, module+"/")
		m.packages[name] = true
		if !under(name, "test") {
			m.mapped = append(m.mapped, name)
		}
		if isProduct(name) {
			m.product[name] = readPkgDoc(t, p)
		}
	}
	slices.Sort(m.mapped)
	m.rows = mapRows(t, filepath.Join(root, architectureDoc))
	return m
}

// readPkgDoc reads the package comment of every non-test file of p.
func readPkgDoc(t *testing.T, p listedPackage) pkgDoc {
	t.Helper()
	d := pkgDoc{Name: p.Name}
	files := slices.Concat(p.GoFiles, p.CgoFiles, p.IgnoredGoFiles)
	slices.Sort(files)
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		mode := parser.ParseComments
		if file != "doc.go" {
			mode |= parser.PackageClauseOnly
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, file), nil, mode)
		if err != nil {
			t.Fatalf("parsing %s: %v", filepath.Join(p.Dir, file), err)
		}
		if file != "doc.go" {
			if f.Doc != nil {
				d.Elsewhere = append(d.Elsewhere, file)
			}
			continue
		}
		d.HasDocGo = true
		if f.Doc != nil {
			d.DocGo = f.Doc.Text()
		}
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
				d.DocGoExtra = append(d.DocGoExtra, "imports")
			} else {
				d.DocGoExtra = append(d.DocGoExtra, "declarations")
			}
		}
		d.DocGoExtra = slices.Compact(d.DocGoExtra)
		for _, c := range f.Comments {
			if c != f.Doc {
				d.DocGoExtra = append(d.DocGoExtra, fmt.Sprintf("a comment at line %d", fset.Position(c.Pos()).Line))
			}
		}
	}
	return d
}

// mapRows returns the first cell of every package row of the map: the table rows that start
// "| `".
func mapRows(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20) // the map's other tables have long rows
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		rows = append(rows, strings.TrimSpace(cell))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// rowPackage is the package a row's first cell names: one path in backquotes, nothing else.
func rowPackage(cell string) (string, bool) {
	inner, ok := strings.CutPrefix(cell, "`")
	if !ok {
		return "", false
	}
	inner, ok = strings.CutSuffix(inner, "`")
	if !ok || inner == "" || strings.ContainsAny(inner, "` ,") {
		return "", false
	}
	return inner, true
}

// commentStart is how a product package's comment must begin: "Package <name> ", and for a
// command "Command <its directory> ".
func commentStart(name string, d pkgDoc) string {
	if d.Name == "main" {
		return "Command " + path.Base(name) + " "
	}
	return "Package " + d.Name + " "
}

// docsRule is one rule on the package comments or the map: the violations it finds, each a
// sentence, and a violation it plants in a copy of the real model.
type docsRule struct {
	name  string
	check func(docsModel) []string
	plant func(*docsModel)
}

var docsRules = []docsRule{
	{
		name: "every product package has a doc.go",
		check: func(m docsModel) []string {
			var out []string
			for _, name := range m.sortedProduct() {
				if !m.product[name].HasDocGo {
					out = append(out, fmt.Sprintf("%s has no doc.go: its package comment (what it holds and why) belongs there", name))
				}
			}
			return out
		},
		plant: func(m *docsModel) {
			m.setDoc("internal/decide/quorum", func(d *pkgDoc) { d.HasDocGo, d.DocGo = false, "" })
		},
	},
	{
		name: "the package comment is in doc.go alone",
		check: func(m docsModel) []string {
			var out []string
			for _, name := range m.sortedProduct() {
				for _, file := range m.product[name].Elsewhere {
					out = append(out, fmt.Sprintf("%s/%s carries a package comment: move it into %s/doc.go", name, file, name))
				}
			}
			return out
		},
		plant: func(m *docsModel) {
			m.setDoc("internal/store/backupcopy", func(d *pkgDoc) { d.Elsewhere = append(slices.Clone(d.Elsewhere), "select.go") })
		},
	},
	{
		name: "doc.go holds only the package comment and the package clause",
		check: func(m docsModel) []string {
			var out []string
			for _, name := range m.sortedProduct() {
				if extra := m.product[name].DocGoExtra; len(extra) > 0 {
					out = append(out, fmt.Sprintf("%s/doc.go holds %s besides the package comment and clause", name, strings.Join(extra, ", ")))
				}
			}
			return out
		},
		plant: func(m *docsModel) {
			m.setDoc("etcdclient", func(d *pkgDoc) { d.DocGoExtra = append(slices.Clone(d.DocGoExtra), "declarations") })
		},
	},
	{
		name: `the package comment starts "Package <name>"`,
		check: func(m docsModel) []string {
			var out []string
			for _, name := range m.sortedProduct() {
				d := m.product[name]
				if !d.HasDocGo {
					continue // the first rule says so
				}
				if want := commentStart(name, d); !strings.HasPrefix(d.DocGo, want) {
					first, _, _ := strings.Cut(d.DocGo, "\n")
					out = append(out, fmt.Sprintf("%s/doc.go: the package comment starts %q, not %q", name, first, want+"..."))
				}
			}
			return out
		},
		plant: func(m *docsModel) {
			m.setDoc("internal/decide/rollout", func(d *pkgDoc) { d.DocGo = "Rollout decides which pod goes next.\n" })
		},
	},
	{
		name: "the map has a row for every package",
		check: func(m docsModel) []string {
			listed := map[string]bool{}
			for _, cell := range m.rows {
				if p, ok := rowPackage(cell); ok {
					listed[p] = true
				}
			}
			var out []string
			for _, name := range m.mapped {
				if !listed[name] {
					out = append(out, fmt.Sprintf("%s has no row in %s: add | `%s` | one-sentence job | I/O |", name, architectureDoc, name))
				}
			}
			return out
		},
		plant: func(m *docsModel) {
			m.rows = slices.DeleteFunc(m.rows, func(c string) bool { return c == "`internal/member/datadir`" })
		},
	},
	{
		name: "the map lists each package once",
		check: func(m docsModel) []string {
			seen := map[string]int{}
			var out []string
			for _, cell := range m.rows {
				p, ok := rowPackage(cell)
				if !ok {
					continue // the next rule says so
				}
				if seen[p]++; seen[p] == 2 {
					out = append(out, fmt.Sprintf("%s has more than one row in %s", p, architectureDoc))
				}
			}
			return out
		},
		plant: func(m *docsModel) { m.rows = append(m.rows, "`internal/decide/roles`") },
	},
	{
		name: "every row of the map names one Go package",
		check: func(m docsModel) []string {
			var out []string
			for _, cell := range m.rows {
				p, ok := rowPackage(cell)
				switch {
				case !ok:
					out = append(out, fmt.Sprintf("%s: the row %s names no single package path in backquotes (one row per package)", architectureDoc, cell))
				case !m.packages[p]:
					out = append(out, fmt.Sprintf("%s: the row %s names no Go package of the module", architectureDoc, cell))
				}
			}
			return out
		},
		plant: func(m *docsModel) { m.rows = append(m.rows, "`internal/decide/nosuch`") },
	},
}

func (m *docsModel) setDoc(name string, change func(*pkgDoc)) {
	d := m.product[name]
	change(&d)
	m.product[name] = d
}

// TestPackageDocs: every product package says what it holds and why in its doc.go, and only
// there; docs/architecture.md has one row for each package outside test/ and no row for anything
// else. The map stays one line per package, the prose stays next to the code it describes, and
// both follow packages as they come and go.
func TestPackageDocs(t *testing.T) {
	m := readDocsModel(t)
	if len(m.product) == 0 || len(m.rows) == 0 {
		t.Fatalf("found %d product packages and %d rows in %s: nothing to check", len(m.product), len(m.rows), architectureDoc)
	}
	for _, r := range docsRules {
		t.Run(r.name, func(t *testing.T) {
			for _, v := range r.check(m) {
				t.Error(v)
			}
			planted := m.clone()
			r.plant(&planted)
			if len(r.check(planted)) == 0 {
				t.Errorf("a planted violation went unseen: the rule checks nothing")
			}
		})
	}
}
