package helm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestChangelogHasChartVersion: the chart's CHANGELOG.md (Keep a Changelog) has a section for the
// version Chart.yaml declares, and the root CHANGELOG.md points at it, so a version bump without
// its changes written down fails here rather than in a user's upgrade.
func TestChangelogHasChartVersion(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"chart", filepath.Join(chartDir(t), "CHANGELOG.md"), []string{"## [" + chart.Version + "]", "keepachangelog.com"}},
		{"root", filepath.Join(mustRepoRoot(t), "CHANGELOG.md"), []string{"(charts/etcd-conductor/CHANGELOG.md)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(text), w) {
					t.Errorf("%s does not contain %q", tc.path, w)
				}
			}
		})
	}
	if chart.Version != chart.AppVersion {
		t.Errorf("chart version %s, appVersion %s: the changelog speaks of one version for both", chart.Version, chart.AppVersion)
	}
}
