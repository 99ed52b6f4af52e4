package helm

import (
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The chart ships the Etcd, EtcdOpsTask and EtcdCopyBackupsTask CRDs from crds/ (generated, not templated). The
// ClusterRole's rules on each resource and its status only work if the CRD installs that resource
// with a status subresource.
func TestChartInstallsCRDs(t *testing.T) {
	ms := splitManifests(t, render(t, nil, "--include-crds"))
	if n := ms.count("CustomResourceDefinition"); n != 3 {
		t.Errorf("rendered %d CRDs, want 3 (etcds, etcdopstasks, etcdcopybackupstasks)", n)
	}
	for _, plural := range []string{"etcds", "etcdopstasks", "etcdcopybackupstasks"} {
		name := plural + ".druid.gardener.cloud"
		m, ok := ms.named("CustomResourceDefinition", "", name)
		if !ok {
			t.Errorf("the chart installs no CRD %s", name)
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		decodeStrict(t, m, &crd)
		if crd.Spec.Group != "druid.gardener.cloud" || crd.Spec.Names.Plural != plural {
			t.Errorf("CRD %s installs %s/%s, want druid.gardener.cloud/%s", crd.Name, crd.Spec.Group, crd.Spec.Names.Plural, plural)
		}
		if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
			t.Errorf("CRD %s scope %s, want Namespaced", name, crd.Spec.Scope)
		}
		i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			return v.Name == "v1alpha1"
		})
		if i < 0 {
			t.Errorf("CRD %s has no v1alpha1 version: %+v", name, crd.Spec.Versions)
			continue
		}
		v := crd.Spec.Versions[i]
		if !v.Served || !v.Storage {
			t.Errorf("CRD %s v1alpha1 served=%t storage=%t, want both", name, v.Served, v.Storage)
		}
		if v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("CRD %s v1alpha1 has no status subresource, so the operator's status grant would be useless", name)
		}
	}
}
