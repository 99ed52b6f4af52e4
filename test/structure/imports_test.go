// Package structure checks the shape of the code that docs/architecture.md draws, by path: what
// lies under internal/decide decides and does no I/O; the manager (internal/operator) and the
// member pod (internal/member) never import each other and meet only in internal/contract, which
// depends on neither; the store (internal/store) serves both and imports neither; no controller
// imports another. It reads the import graph with `go list`, as a newcomer's tools would, and each
// rule is also run on a copy of the graph with a violation planted, so a rule that stopped seeing
// anything would fail too. TestPackageDocs holds the map to the tree the same way: every product
// package's doc.go says what it holds and why, and docs/architecture.md has one row per package.
package structure

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/etcd-conductor/etcd-conductor"

// The groups of the tree, by path below the module.
const (
	decideDir   = "internal/decide"
	operatorDir = "internal/operator"
	memberDir   = "internal/member"
	contractDir = "internal/contract"
	storeDir    = "internal/store"
	apiDir      = "internal/api"
	controllers = "internal/operator/controller"
	// memberAccess is the one way the manager's side reaches the members.
	memberAccess = "internal/operator/memberaccess"
	sidecar      = "internal/member/agent"
	binary       = "cmd/etcd-conductor"
)

// ioImports are the imports that make a package one that does I/O: it talks to the apiserver, to
// members, to a store, to files or the network, or starts processes.
var ioImports = []string{
	"os", "net", "net/http", "crypto/tls", "os/exec",
	"sigs.k8s.io/controller-runtime/pkg/client", "k8s.io/client-go/kubernetes", "k8s.io/client-go/rest",
	"go.etcd.io/etcd/client/v3", "google.golang.org/grpc", "github.com/minio/minio-go/v7",
}

// contractLibraries are the only imports outside the standard library a contract package may
// have: the object metadata its Lease formats are written on, and the parser of the one schedule
// format both sides read (memberpod.ParseSchedule).
var contractLibraries = []string{"k8s.io/apimachinery/pkg/apis/meta/v1", "github.com/robfig/cron/v3"}

type pkg struct {
	ImportPath string
	Imports    []string
}

// graph is the project's packages by path below the module.
type graph map[string]pkg

func listPackages(t *testing.T) graph {
	t.Helper()
	pkgs := graph{}
	for _, p := range goList[pkg](t, "ImportPath,Imports") {
		pkgs[strings.TrimPrefix(p.ImportPath, module+"/")] = p
	}
	return pkgs
}

// goList is `go list -json=<fields> ./...` at the repository root, each package decoded as a T.
func goList[T any](t *testing.T, fields string) []T {
	t.Helper()
	cmd := exec.Command("go", "list", "-json="+fields, "./...")
	cmd.Dir = repoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []T
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p T
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

// ours returns the project packages p imports, by path below the module.
func ours(p pkg) []string {
	var out []string
	for _, imp := range p.Imports {
		if rest, ok := strings.CutPrefix(imp, module+"/"); ok {
			out = append(out, rest)
		}
	}
	return out
}

// path returns a chain of imports from "from" to a package for which stop is true, or nil.
func (g graph) path(from string, stop func(string) bool) []string {
	seen := map[string]bool{}
	var walk func(string) []string
	walk = func(name string) []string {
		if seen[name] {
			return nil
		}
		seen[name] = true
		if stop(name) {
			return []string{name}
		}
		for _, next := range ours(g[name]) {
			if rest := walk(next); rest != nil {
				return append([]string{name}, rest...)
			}
		}
		return nil
	}
	return walk(from)
}

// under says whether name is the package dir or below it ("internal/operator" holds the manager's
// assembly itself).
func under(name, dir string) bool {
	return name == dir || strings.HasPrefix(name, dir+"/")
}

func (g graph) sorted() []string {
	return slices.Sorted(maps.Keys(g))
}

func standardLibrary(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// rule is one structural rule: the violations it finds in a graph, each a sentence.
type rule struct {
	name  string
	check func(graph) []string
	// plant adds a violation to a copy of the real graph.
	plant func(graph)
}

var rules = []rule{
	{
		name: "decide does no I/O",
		// A planner that reached an I/O package, even through another of ours, could no longer
		// be run on a saved state (plan) or property-tested.
		check: func(g graph) []string {
			doesIO := func(name string) bool {
				return slices.ContainsFunc(g[name].Imports, func(imp string) bool { return slices.Contains(ioImports, imp) })
			}
			var out []string
			for _, name := range g.sorted() {
				if !under(name, decideDir) && !under(name, contractDir) {
					continue
				}
				if chain := g.path(name, doesIO); chain != nil {
					out = append(out, "reaches I/O: "+strings.Join(chain, " → "))
				}
			}
			return out
		},
		plant: func(g graph) { g.addImport("internal/decide/rollout", "os") },
	},
	{
		name: "decide imports neither side, the store nor the member client",
		check: func(g graph) []string {
			return g.forbidden(decideDir, operatorDir, memberDir, storeDir, "etcdclient", "tls")
		},
		plant: func(g graph) { g.addImport("internal/decide/recovery", module+"/internal/operator/resources") },
	},
	{
		name:  "the manager never imports the member pod's code",
		check: func(g graph) []string { return g.forbidden(operatorDir, memberDir) },
		plant: func(g graph) { g.addImport("internal/operator/controller/etcd", module+"/internal/member/backup") },
	},
	{
		name:  "the member pod's code never imports the manager's",
		check: func(g graph) []string { return g.forbidden(memberDir, operatorDir) },
		plant: func(g graph) { g.addImport("internal/member/backup", module+"/internal/operator/resources") },
	},
	{
		name:  "the store imports neither side",
		check: func(g graph) []string { return g.forbidden(storeDir, operatorDir, memberDir) },
		plant: func(g graph) { g.addImport("internal/store/backupcopy", module+"/internal/member/restore") },
	},
	{
		name: "the contract imports only the standard library, the API and itself",
		check: func(g graph) []string {
			var out []string
			for _, name := range g.sorted() {
				if !under(name, contractDir) {
					continue
				}
				for _, imp := range g[name].Imports {
					rest, project := strings.CutPrefix(imp, module+"/")
					switch {
					case project && (under(rest, contractDir) || under(rest, apiDir)):
					case !project && (standardLibrary(imp) || slices.Contains(contractLibraries, imp)):
					default:
						out = append(out, fmt.Sprintf("%s imports %s", name, imp))
					}
				}
			}
			return out
		},
		plant: func(g graph) { g.addImport("internal/contract/memberlease", "k8s.io/client-go/kubernetes") },
	},
	{
		name: "no controller imports another",
		check: func(g graph) []string {
			var out []string
			for _, name := range g.sorted() {
				if !under(name, controllers) {
					continue
				}
				for _, imp := range ours(g[name]) {
					if under(imp, controllers) && !under(imp, name) {
						out = append(out, fmt.Sprintf("controller %s imports controller %s", name, imp))
					}
				}
			}
			return out
		},
		plant: func(g graph) {
			g.addImport("internal/operator/controller/recovery", module+"/internal/operator/controller/membership")
		},
	},
	{
		name: "on the manager's side only member access imports the member client",
		// One member API: every controller asks and orders through memberaccess.Cluster, so the
		// pool's key, the credentials and the leader an order goes to are chosen in one place.
		check: func(g graph) []string {
			var out []string
			for _, name := range g.sorted() {
				if !under(name, operatorDir) || under(name, memberAccess) {
					continue
				}
				if slices.Contains(g[name].Imports, module+"/etcdclient") {
					out = append(out, fmt.Sprintf("%s imports etcdclient: reach the members through %s", name, memberAccess))
				}
			}
			return out
		},
		plant: func(g graph) { g.addImport("internal/operator/controller/defrag", module+"/etcdclient") },
	},
	{
		name: "only the binary imports the sidecar",
		check: func(g graph) []string {
			var out []string
			for _, name := range g.sorted() {
				if name == binary || strings.HasPrefix(name, "test/") || under(name, sidecar) {
					continue
				}
				if slices.Contains(ours(g[name]), sidecar) {
					out = append(out, fmt.Sprintf("%s imports the sidecar package %s", name, sidecar))
				}
			}
			return out
		},
		plant: func(g graph) { g.addImport("internal/operator", module+"/"+sidecar) },
	},
}

// forbidden lists the imports, even through other project packages, from a package under from
// of a package under any of the dirs.
func (g graph) forbidden(from string, dirs ...string) []string {
	in := func(name string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return under(name, d) })
	}
	var out []string
	for _, name := range g.sorted() {
		if !under(name, from) {
			continue
		}
		for _, next := range ours(g[name]) {
			if chain := g.path(next, in); chain != nil {
				out = append(out, strings.Join(append([]string{name}, chain...), " → "))
				break
			}
		}
	}
	return out
}

func (g graph) addImport(name, imp string) {
	p := g[name]
	p.Imports = append(slices.Clone(p.Imports), imp)
	g[name] = p
}

func TestLayout(t *testing.T) {
	pkgs := listPackages(t)
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			for _, v := range r.check(pkgs) {
				t.Error(v)
			}
			planted := maps.Clone(pkgs)
			r.plant(planted)
			if len(r.check(planted)) == 0 {
				t.Errorf("a planted violation went unseen: the rule checks nothing")
			}
		})
	}
}
