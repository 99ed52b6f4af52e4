package structure

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ruleIDs are the rule ids declared as constants anywhere under internal/, by the planner they
// belong to: every const whose type is RuleID (a planner's alias: that planner), ruleid.ID (the
// declaring package) or <planner>.RuleID (a controller's own waits: that planner), its value
// evaluated as the compiler would (string literals, constants of the package or of another, +).
// Packages are told apart by name, which the planners' are.
func ruleIDs(t *testing.T) map[string][]string {
	t.Helper()
	// Every string constant by package name, then by const name, as written.
	consts := map[string]map[string]ast.Expr{}
	type typedConst struct{ pkg, name string }
	typed := map[string][]typedConst{} // planner → its rule id constants
	for _, p := range goList[listedPackage](t, "ImportPath,Dir,GoFiles") {
		if !under(strings.TrimPrefix(p.ImportPath, module+"/"), "internal") {
			continue
		}
		fset := token.NewFileSet()
		for _, f := range p.GoFiles {
			file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
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
						if planner, ok := ruleIDPlanner(pkg, vs.Type); ok {
							typed[planner] = append(typed[planner], typedConst{pkg, name.Name})
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
	for planner, cs := range typed {
		for _, c := range cs {
			v, ok := eval(c.pkg, consts[c.pkg][c.name])
			if !ok {
				t.Fatalf("%s.%s: a rule id the test cannot evaluate (literals, constants and + only)", c.pkg, c.name)
			}
			ids[planner] = append(ids[planner], v)
		}
	}
	return ids
}

// ruleIDPlanner tells whether a const of type x, declared in package pkg, is a rule id, and whose.
func ruleIDPlanner(pkg string, x ast.Expr) (string, bool) {
	switch x := x.(type) {
	case *ast.Ident:
		return pkg, x.Name == "RuleID"
	case *ast.SelectorExpr:
		other, ok := x.X.(*ast.Ident)
		switch {
		case !ok:
			return "", false
		case other.Name == "ruleid" && x.Sel.Name == "ID":
			return pkg, true
		case x.Sel.Name == "RuleID":
			return other.Name, true
		}
	}
	return "", false
}

// genericFirst are words that start a rule's own part ("rollout/wait/catch-up") and name no
// planner: an id starting with one is not qualified.
var genericFirst = map[string]bool{"wait": true, "done": true, "skip": true, "refuse": true, "retry": true, "fail": true}

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
			if !qualified || genericFirst[first] {
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
		{"an id starting with a rule's own word", map[string][]string{"membership": {"wait/learner-catching-up"}}},
	} {
		t.Run("planted: "+plant.name, func(t *testing.T) {
			if len(ruleIDProblems(plant.ids)) == 0 {
				t.Errorf("a planted violation went unseen: %v", plant.ids)
			}
		})
	}
}
