package v1alpha1

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestCRDReplicasBoundMatchesMaxReplicas keeps the +kubebuilder:validation:Maximum marker, the
// generated CRD and the constant the controllers check in step: a bound the apiserver enforces
// differently from the one the code assumes would let a huge replica count through one of them.
func TestCRDReplicasBoundMatchesMaxReplicas(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "charts", "etcd-conductor", "files", "crds", "druid.gardener.cloud_etcds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("decoding the generated CRD: %v", err)
	}
	if len(crd.Spec.Versions) == 0 || crd.Spec.Versions[0].Schema == nil {
		t.Fatal("the CRD has no schema")
	}
	replicas, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["replicas"]
	if !ok {
		t.Fatal("the CRD schema has no spec.replicas")
	}
	if replicas.Maximum == nil || *replicas.Maximum != MaxReplicas {
		t.Fatalf("spec.replicas maximum in the CRD is %v, want MaxReplicas = %d (run make generate)", replicas.Maximum, MaxReplicas)
	}
	if MaxReplicas%2 != 1 {
		t.Fatalf("MaxReplicas = %d is even, but the CRD only admits odd sizes", MaxReplicas)
	}
	if len(replicas.XValidations) == 0 {
		t.Fatal("spec.replicas lost its odd-number rule")
	}
}
