package v1alpha1

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestOpsTaskCRDDefaultsMatchTheConstants keeps the +kubebuilder:default markers (etcd-druid's
// defaults, which the apiserver applies) and the constants the planner falls back to in step.
func TestOpsTaskCRDDefaultsMatchTheConstants(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "charts", "etcd-conductor", "files", "crds", "druid.gardener.cloud_etcdopstasks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("decoding the generated CRD: %v", err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
		t.Fatal("the CRD has no single version with a schema")
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	snap := spec.Properties["config"].Properties["onDemandSnapshot"]
	for _, tt := range []struct {
		field  string
		schema apiextensionsv1.JSONSchemaProps
		want   int
	}{
		{"spec.ttlSecondsAfterFinished", spec.Properties["ttlSecondsAfterFinished"], DefaultOpsTaskTTLSeconds},
		{"onDemandSnapshot.timeoutSecondsFull", snap.Properties["timeoutSecondsFull"], DefaultOnDemandTimeoutSecondsFull},
		{"onDemandSnapshot.timeoutSecondsDelta", snap.Properties["timeoutSecondsDelta"], DefaultOnDemandTimeoutSecondsDelta},
	} {
		var got int
		if tt.schema.Default == nil || json.Unmarshal(tt.schema.Default.Raw, &got) != nil || got != tt.want {
			t.Errorf("%s default %v, want %d (run make generate)", tt.field, tt.schema.Default, tt.want)
		}
	}
}
