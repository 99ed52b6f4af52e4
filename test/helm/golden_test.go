package helm

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.yaml from the current chart")

// renderCase is a values combination the tests render: named, with values files from testdata/.
type renderCase struct {
	name   string
	values []string
}

func (c renderCase) valuesPaths(t *testing.T) []string {
	paths := make([]string, 0, len(c.values))
	for _, v := range c.values {
		paths = append(paths, testdataPath(t, v))
	}
	return paths
}

// renderCases are the renders whose full output is committed: a chart change shows up in review
// as a diff of what would be applied to the cluster.
var renderCases = []renderCase{
	{name: "default"},
	{name: "ondelete-tls", values: []string{"ondelete-tls.values.yaml"}},
	{name: "ha-monitoring", values: []string{"ha-monitoring.values.yaml"}},
	{name: "namespaced", values: []string{"namespaced.values.yaml"}},
}

func TestGolden(t *testing.T) {
	for _, tc := range renderCases {
		t.Run(tc.name, func(t *testing.T) {
			// Without the CRDs: they are generated files (TestChartInstallsCRDs checks what the
			// chart makes of them), and in every golden they would be most of it.
			got := render(t, tc.valuesPaths(t), "--set", "crds.install=false")
			path := filepath.Join("testdata", "golden", tc.name+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatalf("creating golden dir: %v", err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatalf("writing golden file: %v", err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading golden file (run `go test ./test/helm/... -run TestGolden -update` to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("render differs from %s; if the change is intended, run `go test ./test/helm/... -run TestGolden -update` and review the diff.\n%s",
					path, firstDifference(string(want), got))
			}
		})
	}
}

// firstDifference shows the first line where two renders part, with a little context: enough to
// see what changed without a diff library.
func firstDifference(want, got string) string {
	const context = 3
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(wl) && i < len(gl) && wl[i] == gl[i] {
		i++
	}
	var b strings.Builder
	for j := max(0, i-context); j < i; j++ {
		fmt.Fprintf(&b, "  %4d   %s\n", j+1, wl[j])
	}
	for j := i; j < min(len(wl), i+context); j++ {
		fmt.Fprintf(&b, "  %4d - %s\n", j+1, wl[j])
	}
	for j := i; j < min(len(gl), i+context); j++ {
		fmt.Fprintf(&b, "  %4d + %s\n", j+1, gl[j])
	}
	return b.String()
}
