package structure

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ruleIDs are the rule ids the planners under internal/decide declare as constants, by package
// directory name: every const whose type is RuleID (the planners' alias) or ruleid.ID, its value
// evaluated as the compiler would (string literals, constants of the package or of another
// planner, +).
func ruleIDs(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join(repoRoot(t), "internal", "decide")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	// Every string constant by package name, then by const name, as written.
	consts := map[string]map[string]ast.Expr{}
	typed := map[string][]string{} // package → the names of its rule id constants
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		fset := token.NewFileSet()
		dir := filepath.Join(root, e.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, filepath.Join(dir, f.Name()), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			pkg := file.Name.Name
			if consts[pkg] == nil {
				consts[pkg] = map[string]ast.Expr{}
			}
			for _, decl := range file.Decls {
				gen, ok := decl.(*ast.GenDecl)
				if !ok || gen.Tok != token.CONST {
					continue
				}
				for _, spec := range gen.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							consts[pkg][name.Name] = vs.Values[i]
						}
						if isRuleIDType(vs.Type) {
							typed[pkg] = append(typed[pkg], name.Name)
						}
					}
				}
			}
		}
	}
	var eval func(pkg string, x ast.Expr) (string, bool)
	eval = func(pkg string, x ast.Expr) (string, bool) {
		switch x := x.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(x.Value)
			return s, err == nil
		case *ast.Ident:
			v, ok := consts[pkg][x.Name]
			if !ok {
				return "", false
			}
			return eval(pkg, v)
		case *ast.SelectorExpr:
			other, ok := x.X.(*ast.Ident)
			if !ok || consts[other.Name] == nil {
				return "", false
			}
			return eval(other.Name, x.Sel)
		case *ast.BinaryExpr:
			a, okA := eval(pkg, x.X)
			b, okB := eval(pkg, x.Y)
			return a + b, okA && okB && x.Op == token.ADD
		case *ast.ParenExpr:
			return eval(pkg, x.X)
		}
		return "", false
	}
	ids := map[string][]string{}
	for pkg, names := range typed {
		for _, name := range names {
			v, ok := eval(pkg, consts[pkg][name])
			if !ok {
				t.Fatalf("%s.%s: a rule id the test cannot evaluate (literals, constants and + only)", pkg, name)
			}
			ids[pkg] = append(ids[pkg], v)
		}
	}
	return ids
}

func isRuleIDType(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name == "RuleID"
	case *ast.SelectorExpr:
		pkg, ok := x.X.(*ast.Ident)
		return ok && pkg.Name == "ruleid" && x.Sel.Name == "ID"
	}
	return false
}

// ruleIDProblems: a rule id must be unique, and its first element must name one planner alone,
// so an Event reason or a metric label says which planner wrote it.
func ruleIDProblems(ids map[string][]string) []string {
	var problems []string
	owner := map[string]string{}    // first element → package
	declared := map[string]string{} // id → package
	for _, pkg := range slices.Sorted(maps.Keys(ids)) {
		for _, id := range ids[pkg] {
			if other, ok := declared[id]; ok && other != pkg {
				problems = append(problems, "rule id "+id+" is declared by "+other+" and "+pkg)
			}
			declared[id] = pkg
			first, _, qualified := strings.Cut(id, "/")
			if !qualified {
				problems = append(problems, pkg+"'s rule id "+id+" is not qualified by its planner (<planner>/…)")
				continue
			}
			if other, ok := owner[first]; ok && other != pkg {
				problems = append(problems, "rule ids starting "+first+"/ come from "+other+" and "+pkg+": a reason would not say which planner wrote it")
				continue
			}
			owner[first] = pkg
		}
	}
	return problems
}

func TestRuleIDsNameTheirPlanner(t *testing.T) {
	ids := ruleIDs(t)
	if len(ids) < 10 || len(ids["rollout"]) < 20 {
		t.Fatalf("found rule ids in %d planners (rollout: %d): the parse finds too little", len(ids), len(ids["rollout"]))
	}
	for _, p := range ruleIDProblems(ids) {
		t.Error(p)
	}
	for _, plant := range []struct {
		name string
		ids  map[string][]string
	}{
		{"an id declared twice", map[string][]string{"rollout": {"rollout/done"}, "membership": {"rollout/done"}}},
		{"a first element shared", map[string][]string{"rollout": {"wait/catch-up"}, "membership": {"wait/remove-quorum"}}},
		{"an unqualified id", map[string][]string{"rollout": {"done"}}},
	} {
		t.Run("planted: "+plant.name, func(t *testing.T) {
			if len(ruleIDProblems(plant.ids)) == 0 {
				t.Errorf("a planted violation went unseen: %v", plant.ids)
			}
		})
	}
}
