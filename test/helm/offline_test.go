package helm

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestTemplateRendersOffline: `helm template` with no cluster and no --kube-version, as a GitOps
// pipeline or a reviewer runs it, renders the same objects as for the Kubernetes version the
// project tests against. A helm built without its release ldflags (make tools builds it so)
// then assumes Kubernetes 1.20, which the chart must not take for a cluster too old for its
// admission policies.
func TestTemplateRendersOffline(t *testing.T) {
	// No cluster to reach, whatever the environment's KUBECONFIG says.
	noCluster := filepath.Join(t.TempDir(), "no-kubeconfig")
	for _, tc := range []struct {
		name string
		set  []string
	}{
		{"defaults", nil},
		{"monitoring", append(append([]string{}, monitoringOn...), serviceMonitorOn...)},
		{"namespaced, no CRDs", []string{"--set", "crds.install=false,watchNamespaces={a,b}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"template", releaseName, chartDir(t), "--namespace", releaseNamespace, "--kubeconfig", noCluster}, tc.set...)
			offline, err := runHelm(t, args...)
			if err != nil {
				t.Fatalf("helm template without a cluster or --kube-version: %v", err)
			}
			got, want := objectNames(splitManifests(t, offline)), objectNames(splitManifests(t, render(t, nil, tc.set...)))
			if !slices.Equal(got, want) {
				t.Errorf("rendered offline:\n%v\nfor Kubernetes %s:\n%v", got, kubeVersion, want)
			}
		})
	}
}

// objectNames are the kind/namespace/name of every manifest, sorted.
func objectNames(ms manifests) []string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Kind+"/"+m.Namespace+"/"+m.Name)
	}
	slices.Sort(names)
	return names
}
