package helm

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// A tag moves; a digest does not. Every base image of the Dockerfile must be pinned by digest so
// that a rebuild cannot pull different bytes than the ones reviewed.
func TestDockerfileBaseImagesPinnedByDigest(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(mustRepoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatalf("reading Dockerfile: %v", err)
	}
	pinned := regexp.MustCompile(`^[^\s@]+@sha256:[0-9a-f]{64}$`)
	stages := map[string]bool{}
	froms := 0
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
			continue
		}
		froms++
		args := fields[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "--") {
			args = args[1:] // --platform=...
		}
		if len(args) == 0 {
			t.Errorf("FROM without an image: %q", line)
			continue
		}
		image := args[0]
		if len(args) >= 3 && strings.EqualFold(args[1], "AS") {
			stages[strings.ToLower(args[2])] = true
		}
		if stages[strings.ToLower(image)] && !strings.Contains(image, "@") {
			continue // an earlier stage of this Dockerfile
		}
		if !pinned.MatchString(image) {
			t.Errorf("base image %q is not pinned by digest (want name:tag@sha256:<64 hex>)", image)
		}
	}
	if froms == 0 {
		t.Fatal("no FROM line in the Dockerfile")
	}
}

// TestManagerRunsTheImagesEntrypoint: the manager container sets args only, so the image's
// ENTRYPOINT runs (Kubernetes: no command, the ENTRYPOINT; args replace CMD) wherever the image
// keeps the binary; its first arg picks the role. The member pods follow the same rule
// (internal/operator/resources TestOurContainersNameNoCommand).
func TestManagerRunsTheImagesEntrypoint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
	}{
		{"defaults", nil},
		{"extra args", []string{"--set", "extraArgs={--zap-devel}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := renderDecoded(t, nil, tc.values...).managerContainer(t)
			if len(c.Command) != 0 {
				t.Errorf("manager sets command %q: the image's entrypoint must run", c.Command)
			}
			if len(c.Args) == 0 || c.Args[0] != "manager" {
				t.Errorf("manager args %q, want the role manager first", c.Args)
			}
		})
	}
}

// TestBinaryCarriesFallbackRoots: make image builds FROM scratch, with no CA bundle, and a
// backup store behind public TLS must still be verified; the binary registers Mozilla's roots
// (x509roots/fallback), which Go uses only where the system has none.
func TestBinaryCarriesFallbackRoots(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/etcd-conductor")
	cmd.Dir = mustRepoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if !slices.Contains(strings.Fields(string(out)), "golang.org/x/crypto/x509roots/fallback") {
		t.Error("cmd/etcd-conductor does not import golang.org/x/crypto/x509roots/fallback: the image has no CA roots")
	}
}
