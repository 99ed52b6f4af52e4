package helm

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/etcd-conductor/etcd-conductor/test/helmcli"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// Every render uses the same release name and namespace so golden files are stable.
const (
	releaseName      = "conductor"
	releaseNamespace = "etcd-system"
	kubeVersion      = "1.36.4"
)

func mustRepoRoot(t *testing.T) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func chartDir(t *testing.T) string {
	return filepath.Join(mustRepoRoot(t), "charts", "etcd-conductor")
}

func helmBinary(t *testing.T) string {
	t.Helper()
	return requireBinary(t, "helm")
}

// requireBinary is a tool from bin/ (`make tools`): a skip without it, a failure under CI.
var requireBinary = localcluster.RequireBinary

// runHelm runs helm with its config, cache and data homes in a temp dir, so tests neither read
// nor write the user's helm state. It returns stdout and, on failure, an error holding stderr.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return helmcli.Run(context.Background(), helmBinary(t), t.TempDir(), args...)
}

// templateArgs builds `helm template` for the chart with the given values files and extra flags.
func templateArgs(t *testing.T, valuesFiles []string, extra ...string) []string {
	// A helm built from source (make tools) assumes Kubernetes 1.20 offline; render for the version
	// the project tests against (Makefile KUBERNETES_VERSION), as `helm install` would see it.
	args := []string{"template", releaseName, chartDir(t), "--namespace", releaseNamespace, "--kube-version", kubeVersion}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	return append(args, extra...)
}

// render returns the manifests helm template produces, failing the test if it fails.
func render(t *testing.T, valuesFiles []string, extra ...string) string {
	t.Helper()
	out, err := runHelm(t, templateArgs(t, valuesFiles, extra...)...)
	if err != nil {
		t.Fatalf("rendering chart: %v", err)
	}
	return out
}

// manifest is one rendered object: its kind and name for lookup, and its YAML for typed decoding.
type manifest struct {
	Kind      string
	Name      string
	Namespace string
	YAML      []byte
}

type manifests []manifest

func splitManifests(t *testing.T, rendered string) manifests {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(rendered)))
	var out manifests
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("splitting rendered manifests: %v", err)
		}
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("reading kind and name of a rendered document: %v\n%s", err, doc)
		}
		if head.Kind == "" {
			continue // a document holding only comments
		}
		out = append(out, manifest{Kind: head.Kind, Name: head.Metadata.Name, Namespace: head.Metadata.Namespace, YAML: doc})
	}
}

// ofKind returns the only rendered object of a kind, failing unless there is exactly one.
func (ms manifests) ofKind(t *testing.T, kind string) manifest {
	t.Helper()
	var found []manifest
	for _, m := range ms {
		if m.Kind == kind {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s, rendered %d", kind, len(found))
	}
	return found[0]
}

// named finds a rendered object by kind, namespace (empty for cluster-scoped objects and for
// objects rendered without one) and name.
func (ms manifests) named(kind, namespace, name string) (manifest, bool) {
	for _, m := range ms {
		if m.Kind == kind && m.Name == name && m.Namespace == namespace {
			return m, true
		}
	}
	return manifest{}, false
}

func (ms manifests) count(kind string) int {
	n := 0
	for _, m := range ms {
		if m.Kind == kind {
			n++
		}
	}
	return n
}

// decodeStrict decodes a rendered object into its Go type, rejecting unknown fields so a
// misspelled field in a template fails here rather than being dropped by the API server.
func decodeStrict(t *testing.T, m manifest, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(m.YAML, into); err != nil {
		t.Fatalf("decoding %s %s strictly: %v\n%s", m.Kind, m.Name, err, m.YAML)
	}
}

func testdataPath(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("resolving testdata/%s: %v", name, err)
	}
	return path
}

// writeValues writes a values file into a temp dir, for cases that exist only as a typo.
func writeValues(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("writing values file: %v", err)
	}
	return path
}
