package helm

import (
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The chart ships the Etcd CRD from crds/ (generated, not templated). The ClusterRole's rules on
// etcds and etcds/status only work if the CRD installs that resource with a status subresource.
func TestChartInstallsEtcdCRD(t *testing.T) {
	ms := splitManifests(t, render(t, nil, "--include-crds"))
	var crd apiextensionsv1.CustomResourceDefinition
	decodeStrict(t, ms.ofKind(t, "CustomResourceDefinition"), &crd)

	if crd.Name != "etcds.druid.gardener.cloud" || crd.Spec.Group != "druid.gardener.cloud" || crd.Spec.Names.Plural != "etcds" {
		t.Errorf("CRD %s installs %s/%s, want druid.gardener.cloud/etcds", crd.Name, crd.Spec.Group, crd.Spec.Names.Plural)
	}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("CRD scope %s, want Namespaced", crd.Spec.Scope)
	}
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Name == "v1alpha1"
	})
	if i < 0 {
		t.Fatalf("CRD has no v1alpha1 version: %+v", crd.Spec.Versions)
	}
	v := crd.Spec.Versions[i]
	if !v.Served || !v.Storage {
		t.Errorf("v1alpha1 served=%t storage=%t, want both", v.Served, v.Storage)
	}
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("v1alpha1 has no status subresource, so the operator's etcds/status grant would be useless")
	}
}
