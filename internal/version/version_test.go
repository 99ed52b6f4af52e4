package version

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestVersionIsTheChartsAppVersion: the binary's release and the chart's appVersion are one, so
// the member-agent image the manager names by default is the image the chart installs.
func TestVersionIsTheChartsAppVersion(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "charts", "etcd-conductor", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion != Version {
		t.Fatalf("Chart.yaml appVersion %q, binary version %q", chart.AppVersion, Version)
	}
}

func TestBuildString(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    Build
		want string
	}{
		{"commit", Build{Version: "0.1.0", Commit: "abc", Go: "go1.25", Platform: "linux/amd64"}, "etcd-conductor 0.1.0, commit abc, go1.25 linux/amd64"},
		{"modified", Build{Version: "0.1.0", Commit: "abc", Modified: true}, "commit abc (modified)"},
		{"no commit", Build{Version: "0.1.0"}, "unknown commit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.String(); !strings.Contains(got, tt.want) {
				t.Fatalf("%q lacks %q", got, tt.want)
			}
		})
	}
}
