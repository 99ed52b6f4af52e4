package helm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// rbacSet is one group of +kubebuilder:rbac markers and the chart file generated from them. The
// Makefile's generate target runs the same controller-gen commands.
type rbacSet struct {
	name  string // roleName, and the directory under files/rbac
	paths string // the packages whose markers make the set
}

var rbacSets = []rbacSet{
	{name: "manager", paths: "./internal/operator/controller/..."},
	{name: "leader-election", paths: "./internal/operator"},
	{name: "metrics-auth", paths: "./internal/operator/metricsserving"},
	{name: "report-auth", paths: "./internal/operator/reportauth"},
}

func (s rbacSet) generateArgs(outDir string) []string {
	return []string{"rbac:roleName=" + s.name, "paths=" + s.paths, "output:rbac:artifacts:config=" + outDir}
}

// generatedRules runs controller-gen on the markers now in the code and returns the file it
// writes and the rules in it.
func generatedRules(t *testing.T, set rbacSet) ([]byte, []rbacv1.PolicyRule) {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(requireBinary(t, "controller-gen"), set.generateArgs(out)...)
	cmd.Dir = mustRepoRoot(t)
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, output)
	}
	data, err := os.ReadFile(filepath.Join(out, "role.yaml"))
	if err != nil {
		t.Fatalf("reading controller-gen output: %v", err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatalf("decoding controller-gen output: %v\n%s", err, data)
	}
	if len(role.Rules) == 0 {
		t.Fatalf("controller-gen found no rbac markers in %s", set.paths)
	}
	return data, role.Rules
}

// The markers beside the code are the one source of the manager's rights: the committed chart
// files are what controller-gen makes of them now, and every Role and ClusterRole the chart
// renders for the manager carries exactly those rules, cluster-wide and namespaced alike.
func TestRBACMatchesMarkers(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(mustRepoRoot(t), "Makefile"))
	if err != nil {
		t.Fatalf("reading Makefile: %v", err)
	}
	want := map[string][]rbacv1.PolicyRule{}
	for _, set := range rbacSets {
		data, rules := generatedRules(t, set)
		want[set.name] = rules
		if cmd := "rbac:roleName=" + set.name + " paths=" + set.paths + " "; !strings.Contains(string(makefile), cmd) {
			t.Errorf("make generate does not run controller-gen %s…: the Makefile and this test disagree", cmd)
		}
		committed, err := os.ReadFile(filepath.Join(chartDir(t), "files", "rbac", set.name, "role.yaml"))
		if err != nil {
			t.Fatalf("reading the chart's %s rules: %v", set.name, err)
		}
		if string(committed) != string(data) {
			t.Errorf("charts/etcd-conductor/files/rbac/%s/role.yaml is stale: run make generate\n%s",
				set.name, firstDifference(string(committed), string(data)))
		}
	}

	type role struct{ kind, namespace, name, rules string }
	cases := []struct {
		name   string
		values []string
		roles  []role
		absent []role
	}{
		{
			name: "cluster-wide",
			roles: []role{
				{"ClusterRole", "", fullname, "manager"},
				{"Role", releaseNamespace, fullname + "-leader-election", "leader-election"},
				{"ClusterRole", "", fullname + "-metrics-auth", "metrics-auth"},
				{"ClusterRole", "", fullname + "-report-auth", "report-auth"},
			},
			absent: []role{{kind: "Role", namespace: "team-a", name: fullname}},
		},
		{
			name:   "namespaced",
			values: []string{"namespaced.values.yaml"},
			roles: []role{
				{"Role", "team-a", fullname, "manager"},
				{"Role", "team-b", fullname, "manager"},
				{"Role", releaseNamespace, fullname + "-leader-election", "leader-election"},
				{"ClusterRole", "", fullname + "-metrics-auth", "metrics-auth"},
				{"ClusterRole", "", fullname + "-report-auth", "report-auth"},
			},
			absent: []role{{kind: "ClusterRole", name: fullname}, {kind: "ClusterRoleBinding", name: fullname}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var paths []string
			for _, v := range tc.values {
				paths = append(paths, testdataPath(t, v))
			}
			ms := splitManifests(t, render(t, paths))
			for _, r := range tc.roles {
				m, ok := ms.named(r.kind, r.namespace, r.name)
				if !ok {
					t.Errorf("no %s %s/%s rendered", r.kind, r.namespace, r.name)
					continue
				}
				var got rbacv1.ClusterRole // a Role's fields are a subset
				decodeStrict(t, m, &got)
				if !equality.Semantic.DeepEqual(got.Rules, want[r.rules]) {
					t.Errorf("%s %s/%s rules differ from the %s markers:\ngot  %+v\nwant %+v", r.kind, r.namespace, r.name, r.rules, got.Rules, want[r.rules])
				}
			}
			for _, r := range tc.absent {
				if _, ok := ms.named(r.kind, r.namespace, r.name); ok {
					t.Errorf("%s %s/%s rendered, want none", r.kind, r.namespace, r.name)
				}
			}
		})
	}
}
