package helm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// The chart ships the Etcd, EtcdOpsTask and EtcdCopyBackupsTask CRDs as templates (generated into
// files/crds), so that helm upgrade upgrades them, kept on uninstall. The ClusterRole's rules on
// each resource and its status only work if the CRD installs that resource with a status
// subresource.
func TestChartInstallsCRDs(t *testing.T) {
	if n := splitManifests(t, render(t, nil, "--set", "crds.install=false")).count("CustomResourceDefinition"); n != 0 {
		t.Errorf("rendered %d CRDs with crds.install=false", n)
	}
	ms := splitManifests(t, render(t, nil))
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
		if crd.Annotations["helm.sh/resource-policy"] != "keep" || crd.Labels["app.kubernetes.io/part-of"] != "etcd-conductor" {
			t.Errorf("CRD %s annotations %v labels %v: want it kept on uninstall and labelled", name, crd.Annotations, crd.Labels)
		}
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

// TestCRDLifecycleOnAPIServer: on a real kube-apiserver, helm install creates the CRDs as part of
// the release; helm upgrade brings back a CRD the release lacks (what crds/ never did);
// uninstall keeps them; another release is refused; a CRD no release owns (etcd-druid's) is
// refused by name; adopted as docs/upgrading.md says, it is upgraded.
func TestCRDLifecycleOnAPIServer(t *testing.T) {
	helmBinary(t)
	cluster := apiServer(t)
	kubeconfig := cluster.KubeconfigPath()
	ctx := t.Context()
	c := cluster.Client()
	createNamespace(ctx, t, cluster, releaseNamespace)
	helm := func(args ...string) error {
		_, err := runHelm(t, append(args, chartDir(t), "--kubeconfig", kubeconfig, "--namespace", releaseNamespace)...)
		return err
	}
	crd := func(plural string) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		return u, c.Get(ctx, client.ObjectKey{Name: plural + ".druid.gardener.cloud"}, u)
	}
	plurals := []string{"etcds", "etcdopstasks", "etcdcopybackupstasks"}

	if err := helm("install", releaseName); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	for _, p := range plurals {
		u, err := crd(p)
		if err != nil {
			t.Fatalf("CRD %s after install: %v", p, err)
		}
		if got := u.GetAnnotations()["meta.helm.sh/release-name"]; got != releaseName {
			t.Errorf("CRD %s owned by release %q, want %q", p, got, releaseName)
		}
	}

	// A release that lacked a CRD: the upgrade installs it.
	missing, err := crd("etcdcopybackupstasks")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, missing); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the CRD deleted", func(ctx context.Context) (bool, string) {
		_, err := crd("etcdcopybackupstasks")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := helm("upgrade", releaseName); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if _, err := crd("etcdcopybackupstasks"); err != nil {
		t.Fatalf("helm upgrade did not bring the CRD back: %v", err)
	}

	if err := helm("install", "second"); err == nil || !strings.Contains(err.Error(), "belongs to the Helm release "+releaseNamespace+"/"+releaseName) {
		t.Fatalf("a second release installing the CRDs: %v, want a refusal naming the owner", err)
	}
	if _, err := runHelm(t, "uninstall", releaseName, "--kubeconfig", kubeconfig, "--namespace", releaseNamespace); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	for _, p := range plurals {
		if _, err := crd(p); err != nil {
			t.Errorf("CRD %s after uninstall: %v, want it kept", p, err)
		}
	}

	// CRDs no release owns, as etcd-druid's chart or a crds/ directory leaves them.
	for _, p := range plurals {
		u, err := crd(p)
		if err != nil {
			t.Fatal(err)
		}
		annotations := u.GetAnnotations()
		delete(annotations, "meta.helm.sh/release-name")
		delete(annotations, "meta.helm.sh/release-namespace")
		u.SetAnnotations(annotations)
		if err := c.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := helm("install", releaseName); err == nil || !strings.Contains(err.Error(), "no Helm release of etcd-conductor owns it") {
		t.Fatalf("install over CRDs no release owns: %v, want a refusal", err)
	}
	// Adopted as docs/upgrading.md says: installed over them.
	for _, p := range plurals {
		u, err := crd(p)
		if err != nil {
			t.Fatal(err)
		}
		labels, annotations := u.GetLabels(), u.GetAnnotations()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["app.kubernetes.io/managed-by"] = "Helm"
		annotations["meta.helm.sh/release-name"], annotations["meta.helm.sh/release-namespace"] = releaseName, releaseNamespace
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		if err := c.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := helm("install", releaseName); err != nil {
		t.Fatalf("install over adopted CRDs: %v", err)
	}
}
