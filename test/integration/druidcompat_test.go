package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/etcd-conductor/etcd-conductor/test/envtestutil"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// druidManifests are Etcds written for etcd-druid (testdata/druid): the fields of its samples and
// one manifest with every field set. They must apply unchanged with strict field validation, which
// kubectl uses by default.
var druidManifests = []string{"example.yaml", "config-sample.yaml", "object-store.yaml", "every-field.yaml"}

func readManifest(t *testing.T, name, namespace string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "druid", name))
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	obj.SetNamespace(namespace)
	return obj
}

func TestDruidManifestsApplyWithStrictFieldValidation(t *testing.T) {
	env := envtestutil.Start(t, envtestutil.Options{})
	ctx := context.Background()
	const ns = "druid-compat"
	if err := framework.CreateNamespace(ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	strict := client.FieldValidation("Strict")

	for _, name := range druidManifests {
		t.Run("create/"+name, func(t *testing.T) {
			obj := readManifest(t, name, ns)
			if err := env.Client.Create(ctx, obj, strict); err != nil {
				t.Fatalf("strict create of %s refused: %v", name, err)
			}
			// What was sent is what is stored: nothing was pruned.
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(obj.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
				t.Fatal(err)
			}
			sent, _, _ := unstructured.NestedMap(readManifest(t, name, ns).Object, "spec")
			got, _, _ := unstructured.NestedMap(stored.Object, "spec")
			for _, path := range leafPaths(sent, nil) {
				if !hasPath(got, path) {
					t.Errorf("%s: field spec.%s was pruned", name, strings.Join(path, "."))
				}
			}
		})
		t.Run("server-side-apply/"+name, func(t *testing.T) {
			obj := readManifest(t, name, ns)
			obj.SetName(obj.GetName() + "-ssa")
			if err := env.Client.Patch(ctx, obj, client.Apply, client.FieldOwner("druid-user"), client.ForceOwnership, strict); err != nil { //nolint:staticcheck // the typed Apply API needs apply configurations we do not generate
				t.Fatalf("strict server-side apply of %s refused: %v", name, err)
			}
		})
	}

	t.Run("typo is rejected", func(t *testing.T) {
		err := env.Client.Create(ctx, readManifest(t, "typo.yaml", ns), strict)
		if err == nil || !strings.Contains(err.Error(), `unknown field "spec.etcd.qouta"`) {
			t.Fatalf("want an unknown-field error naming spec.etcd.qouta, got %v", err)
		}
	})

	t.Run("kubectl apply", func(t *testing.T) {
		binDir, err := localcluster.DefaultBinDir()
		if err != nil {
			t.Skip(err)
		}
		kubectl := filepath.Join(binDir, "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			t.Skipf("no kubectl in %s", binDir)
		}
		user, err := env.Environment.AddUser(envtest.User{Name: "druid-user", Groups: []string{"system:masters"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		config, err := user.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(kubeconfig, config, 0o600); err != nil {
			t.Fatal(err)
		}
		run := func(file string) (string, error) {
			cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "-n", ns, "-f", filepath.Join("testdata", "druid", file))
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		for _, name := range druidManifests {
			// The objects exist from the subtests above: this is an update through kubectl's
			// client-side apply, validated strictly by the server (kubectl's default).
			if out, err := run(name); err != nil {
				t.Errorf("kubectl apply -f %s: %v\n%s", name, err, out)
			}
		}
		out, err := run("typo.yaml")
		if err == nil || !strings.Contains(out, `unknown field "spec.etcd.qouta"`) {
			t.Errorf("kubectl apply of typo.yaml: want an unknown-field error, got %v\n%s", err, out)
		}
	})
}

// leafPaths lists the paths of a manifest's scalar and list values.
func leafPaths(m map[string]any, prefix []string) [][]string {
	var out [][]string
	for k, v := range m {
		p := append(append([]string(nil), prefix...), k)
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			out = append(out, leafPaths(sub, p)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func hasPath(m map[string]any, path []string) bool {
	v, ok := m[path[0]]
	if !ok {
		return false
	}
	if len(path) == 1 {
		return true
	}
	sub, ok := v.(map[string]any)
	return ok && hasPath(sub, path[1:])
}
