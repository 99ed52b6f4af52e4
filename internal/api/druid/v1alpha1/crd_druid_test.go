package v1alpha1

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..", "..", "..")

func readCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "charts", "etcd-conductor", "files", "crds", "druid.gardener.cloud_etcds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("decoding the generated CRD: %v", err)
	}
	return crd
}

// internalCRD converts the CRD to the apiserver's internal form, which its validation and the
// structural schema read.
func internalCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensions.CustomResourceDefinition {
	t.Helper()
	out := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil); err != nil {
		t.Fatalf("converting the CRD: %v", err)
	}
	return out
}

// TestCRDPassesTheAPIServersValidation runs the apiserver's own CRD validation, which compiles
// every x-kubernetes-validations rule and checks its estimated cost: a rule over the budget would
// make the chart's install fail, which no unit test of the Go types would notice.
func TestCRDPassesTheAPIServersValidation(t *testing.T) {
	crd := internalCRD(t, readCRD(t))
	// The apiserver records the stored version when it creates the CRD; validation wants one.
	crd.Status.StoredVersions = []string{crd.Spec.Versions[0].Name}
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), crd); len(errs) > 0 {
		t.Fatalf("the apiserver would refuse the CRD: %v", errs.ToAggregate())
	}
}

// TestCRDKeepsEveryDruidField prunes the integration test's manifest with every etcd-druid field
// against the generated schema, as the apiserver does: a field the schema lacks would be refused
// by kubectl's strict validation (and dropped without it).
func TestCRDKeepsEveryDruidField(t *testing.T) {
	// With one version, the internal form holds its schema at the top (spec.validation).
	crd := internalCRD(t, readCRD(t))
	if crd.Spec.Validation == nil || crd.Spec.Validation.OpenAPIV3Schema == nil {
		t.Fatal("the CRD has no schema")
	}
	structural, err := structuralschema.NewStructural(crd.Spec.Validation.OpenAPIV3Schema)
	if err != nil {
		t.Fatalf("structural schema: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "test", "testdata", "druid", "every-field.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	pruned := pruning.PruneWithOptions(obj, structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if len(pruned) > 0 {
		t.Fatalf("fields unknown to the CRD: %s", strings.Join(pruned, ", "))
	}
	// The manifest must also name the newest fields, or this test proves nothing about them.
	for _, want := range []string{"enableGRPCGateway:", "memberNamePrefix:", "additionalAdvertisePeerURLs:",
		"skipClientSANVerification:", "backendBboltFreelistType:", "bootstrapWithExistingCluster:"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("every-field.yaml does not set %s", strings.TrimSuffix(want, ":"))
		}
	}
}

// TestCRDDruidRules checks the rules taken over from etcd-druid: memberNamePrefix can be neither
// changed nor added or removed after creation, bootstrapWithExistingCluster cannot be added after
// creation, and the field etcd-druid reverted is gone.
func TestCRDDruidRules(t *testing.T) {
	spec := readCRD(t).Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	rules := func(s apiextensionsv1.JSONSchemaProps) string {
		var out []string
		for _, r := range s.XValidations {
			out = append(out, r.Rule)
		}
		return strings.Join(out, "\n")
	}
	for _, tc := range []struct {
		name, got, want string
	}{
		{"memberNamePrefix cannot change", rules(spec.Properties["memberNamePrefix"]), "self == oldSelf"},
		{"memberNamePrefix cannot come or go", rules(spec), "has(oldSelf.memberNamePrefix) == has(self.memberNamePrefix)"},
		{"bootstrapWithExistingCluster only at creation", rules(spec.Properties["etcd"]), "!has(self.bootstrapWithExistingCluster) || has(oldSelf.bootstrapWithExistingCluster)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.got, tc.want) {
				t.Errorf("rules %q lack %q", tc.got, tc.want)
			}
		})
	}
	if _, ok := spec.Properties["externallyManagedMemberAddresses"]; ok {
		t.Error("spec.externallyManagedMemberAddresses is declared, but etcd-druid reverted it before any release")
	}
}
