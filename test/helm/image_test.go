package helm

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Dockerfile.dockerignore leaves test/, charts/ and testdata out of the image build context, and
// the image is built with no Docker engine here to catch a mistake. So check the one thing that
// could break it: every package of this module the binary builds from, and every file it embeds,
// lies outside the excluded paths.
func TestImageBuildContextHoldsBinarySources(t *testing.T) {
	root := mustRepoRoot(t)
	cmd := exec.Command("go", "list", "-e", "-deps",
		"-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}`,
		"./cmd/etcd-conductor")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	excluded := []string{"test/", "charts/", "bin/", ".ci/", "testdata/"}
	check := func(path string) {
		rel, err := filepath.Rel(root, path)
		if err != nil {
			t.Fatalf("%s is outside the repo: %v", path, err)
		}
		rel = "/" + filepath.ToSlash(rel)
		for _, ex := range excluded {
			if strings.Contains(rel+"/", "/"+ex) {
				t.Errorf("the binary builds from %s, which Dockerfile.dockerignore excludes (%s)", rel[1:], ex)
			}
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		check(fields[0])
		for _, embedded := range fields[1:] {
			check(filepath.Join(fields[0], embedded))
		}
	}
}
