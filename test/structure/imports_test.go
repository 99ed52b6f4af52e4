// Package structure checks the shape of the code that docs/architecture.md draws: the pure
// planners below every package that does I/O, no controller importing another, the member-agent
// sidecar imported by the binary alone, and every package on the map. It reads the import graph
// with `go list`, as a newcomer's tools would.
package structure

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/etcd-conductor/etcd-conductor"

// pure are the packages that decide: no I/O, no clock. A planner that reached an I/O package,
// even through another of ours, could no longer be run on a saved state or property-tested.
var pure = []string{
	"internal/rollout", "internal/membership", "internal/memberhealth", "internal/recovery", "internal/defrag",
	"internal/updatestrategy", "internal/roles", "internal/operation", "internal/quorum", "internal/ruleid",
	"internal/specgate", "internal/snapshot", "internal/opstask", "internal/copytask", "internal/transport",
	"internal/backupgate", "internal/seeding", "internal/versionchange", "internal/volumechange", "internal/trustchange",
}

// ioImports are the imports that make a package one that does I/O: it talks to the apiserver, to
// members, to a store, to files or the network, or reads the clock's side (a process).
var ioImports = []string{
	"os", "net", "net/http", "crypto/tls", "os/exec",
	"sigs.k8s.io/controller-runtime/pkg/client", "k8s.io/client-go/kubernetes", "k8s.io/client-go/rest",
	"go.etcd.io/etcd/client/v3", "google.golang.org/grpc", "github.com/minio/minio-go/v7",
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = repoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module+"/")] = p
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
func path(pkgs map[string]pkg, from string, stop func(string) bool) []string {
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
		for _, next := range ours(pkgs[name]) {
			if rest := walk(next); rest != nil {
				return append([]string{name}, rest...)
			}
		}
		return nil
	}
	return walk(from)
}

func TestPlannersAreBelowEveryIOPackage(t *testing.T) {
	pkgs := listPackages(t)
	doesIO := func(name string) bool {
		return slices.ContainsFunc(pkgs[name].Imports, func(imp string) bool { return slices.Contains(ioImports, imp) })
	}
	for _, name := range pure {
		t.Run(name, func(t *testing.T) {
			if _, ok := pkgs[name]; !ok {
				t.Fatalf("package %s not found", name)
			}
			if chain := path(pkgs, name, doesIO); chain != nil {
				t.Fatalf("reaches I/O: %s", strings.Join(chain, " → "))
			}
		})
	}
}

func TestNoControllerImportsAnother(t *testing.T) {
	pkgs := listPackages(t)
	controller := func(name string) bool { return strings.HasPrefix(name, "internal/controller/") }
	for name, p := range pkgs {
		if !controller(name) {
			continue
		}
		for _, imp := range ours(p) {
			if controller(imp) && !strings.HasPrefix(imp, name+"/") {
				t.Errorf("controller %s imports controller %s", name, imp)
			}
		}
	}
}

// TestOnlyTheBinaryImportsTheSidecar: what the operator and the member agent agree on lives in a
// package of its own; the operator's packages never import the sidecar's.
func TestOnlyTheBinaryImportsTheSidecar(t *testing.T) {
	pkgs := listPackages(t)
	for name, p := range pkgs {
		if name == "cmd/etcd-conductor" || strings.HasPrefix(name, "test/") || strings.HasPrefix(name, "internal/memberagent") {
			continue
		}
		if slices.Contains(ours(p), "internal/memberagent") {
			t.Errorf("%s imports the sidecar package internal/memberagent", name)
		}
	}
}

// TestEveryPackageIsOnTheMap: docs/architecture.md names every product package, so the map
// stays true as packages come and go.
func TestEveryPackageIsOnTheMap(t *testing.T) {
	pkgs := listPackages(t)
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for name := range pkgs {
		if strings.HasPrefix(name, "test/") || strings.Contains(name, "/testdata") || strings.HasPrefix(name, "internal/api/") {
			continue
		}
		if !bytes.Contains(doc, []byte("`"+name+"`")) {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("docs/architecture.md does not name %s", strings.Join(missing, ", "))
	}
}
