package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func testSpec(t *testing.T) Spec {
	t.Helper()
	dir := t.TempDir()
	s := Spec{Name: "example.test/conductor", Version: "1.2.3", Revision: "abc", Source: "https://example.test", Created: 1700000000, DockerPlatform: "linux/arm64"}
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, arch)
		if err := os.WriteFile(p, []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		s.Binaries = append(s.Binaries, platformBinary{OS: "linux", Arch: arch, Path: p})
	}
	return s
}

func writeArchive(t *testing.T, s Spec) []byte {
	t.Helper()
	a, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "image.tar")
	if err := a.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// untar writes the archive's entries under dir.
func untar(t *testing.T, data []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestArchiveIsAnOCILayoutOfBothPlatforms reads the archive back with go-containerregistry's
// layout reader (what a loader sees) and checks each platform's image: the binary at the
// entrypoint, the nonroot user and its passwd entry, the labels, every timestamp fixed.
func TestArchiveIsAnOCILayoutOfBothPlatforms(t *testing.T) {
	s := testSpec(t)
	dir := t.TempDir()
	untar(t, writeArchive(t, s), dir)
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["io.containerd.image.name"] != "example.test/conductor:1.2.3" {
		t.Fatalf("index.json: want one entry named example.test/conductor:1.2.3, got %+v", topManifest.Manifests)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("want 2 platform manifests, got %d", len(im.Manifests))
	}
	for _, d := range im.Manifests {
		t.Run(d.Platform.String(), func(t *testing.T) {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Architecture != d.Platform.Architecture || cfg.OS != "linux" {
				t.Errorf("config platform %s/%s, index says %s", cfg.OS, cfg.Architecture, d.Platform)
			}
			if cfg.Config.User != "65532:65532" || strings.Join(cfg.Config.Entrypoint, " ") != "/etcd-conductor" || len(cfg.Config.Cmd) != 0 {
				t.Errorf("user %q entrypoint %q cmd %q", cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.Cmd)
			}
			for k, want := range map[string]string{
				"org.opencontainers.image.version": "1.2.3", "org.opencontainers.image.revision": "abc",
				"org.opencontainers.image.licenses": "Apache-2.0", "org.opencontainers.image.source": "https://example.test",
				"org.opencontainers.image.title": "etcd-conductor",
			} {
				if got := cfg.Config.Labels[k]; got != want {
					t.Errorf("label %s = %q, want %q", k, got, want)
				}
			}
			if !cfg.Created.Equal(cfg.Created.Time) || cfg.Created.Unix() != s.Created {
				t.Errorf("created %v, want %d", cfg.Created, s.Created)
			}
			files := flatten(t, img)
			if got := files["etcd-conductor"]; got.data != "binary for "+d.Platform.Architecture || got.mode&0o111 == 0 {
				t.Errorf("binary: %+v", got)
			}
			if !strings.Contains(files["etc/passwd"].data, "nonroot:x:65532:65532:") || !strings.Contains(files["etc/group"].data, "nonroot:x:65532:") {
				t.Errorf("passwd %q group %q", files["etc/passwd"].data, files["etc/group"].data)
			}
			for name, f := range files {
				if f.mtime != s.Created {
					t.Errorf("%s: mtime %d, want %d", name, f.mtime, s.Created)
				}
			}
		})
	}
}

type entry struct {
	data  string
	mode  int64
	mtime int64
}

func flatten(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]entry{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[strings.TrimSuffix(h.Name, "/")] = entry{data: string(b), mode: h.Mode, mtime: h.ModTime.Unix()}
	}
}

// TestArchiveIsReproducible: the same inputs, the same bytes (so the same digests).
func TestArchiveIsReproducible(t *testing.T) {
	s := testSpec(t)
	if !bytes.Equal(writeArchive(t, s), writeArchive(t, s)) {
		t.Fatal("two builds of the same spec differ")
	}
}

// TestDockerManifestNamesTheHostPlatformsBlobs: docker load without OCI support reads only
// manifest.json; every path it names must be in the archive, the config that of DockerPlatform.
func TestDockerManifestNamesTheHostPlatformsBlobs(t *testing.T) {
	s := testSpec(t)
	dir := t.TempDir()
	untar(t, writeArchive(t, s), dir)
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m []dockerManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != "example.test/conductor:1.2.3" || len(m[0].Layers) != 2 {
		t.Fatalf("manifest.json: %s", raw)
	}
	for _, p := range append([]string{m[0].Config}, m[0].Layers...) {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("manifest.json names %s: %v", p, err)
		}
	}
	var cfg v1.ConfigFile
	cfgRaw, err := os.ReadFile(filepath.Join(dir, m[0].Config))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(cfgRaw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != "arm64" {
		t.Errorf("manifest.json's config is for %s, want arm64", cfg.Architecture)
	}
}

// TestBuildRefuses: what would give a broken archive fails the build with a message.
func TestBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Spec)
		want   string
	}{
		{"docker platform not built", func(s *Spec) { s.DockerPlatform = "linux/s390x" }, "no -binary for linux/s390x"},
		{"binary missing", func(s *Spec) { s.Binaries[0].Path = "/nonexistent" }, "reading the binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(t)
			tc.mutate(&s)
			if _, err := Build(s); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}

// TestDockerfileStatesTheSameContract: users who build with Docker get the image make image
// builds, as far as the pods can tell: the binary's path as the ENTRYPOINT, the user, the labels.
func TestDockerfileStatesTheSameContract(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(raw)
	want := []string{
		"COPY --from=builder " + BinaryPath + " " + BinaryPath + "\n",
		"USER " + User + "\n",
		`ENTRYPOINT ["` + BinaryPath + `"]`,
	}
	for k := range (Spec{}).labels() {
		want = append(want, k+"=")
	}
	for _, w := range want {
		t.Run(strings.TrimSpace(w), func(t *testing.T) {
			if !strings.Contains(dockerfile, w) {
				t.Errorf("the Dockerfile lacks %q", w)
			}
		})
	}
}
