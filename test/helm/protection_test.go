package helm

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

const protectionTemplate = "templates/component-protection-policy.yaml"

// renderProtection decodes the component protection policy and its binding.
func renderProtection(t *testing.T, extra ...string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	ms := splitManifests(t, render(t, nil, append([]string{"--show-only", protectionTemplate}, extra...)...))
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	decodeStrict(t, ms.ofKind(t, "ValidatingAdmissionPolicy"), policy)
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	decodeStrict(t, ms.ofKind(t, "ValidatingAdmissionPolicyBinding"), binding)
	return policy, binding
}

// The chart renders etcd-druid's component protection as a policy on every kind the Etcd
// reconciler writes, keyed on the label and annotation the operator really puts there, allowing
// the ServiceAccount the manager really runs as.
func TestComponentProtectionPolicyRendering(t *testing.T) {
	policy, binding := renderProtection(t)
	if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v does not deny by policy %s", binding.Spec, policy.Name)
	}
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy = %v, want Fail: an unevaluated policy must not let a deletion through", policy.Spec.FailurePolicy)
	}

	t.Run("kinds", func(t *testing.T) {
		matched := map[string][]string{}
		for _, rule := range policy.Spec.MatchConstraints.ResourceRules {
			for _, res := range rule.Resources {
				for _, group := range rule.APIGroups {
					key := group + "/" + res
					for _, op := range rule.Operations {
						matched[key] = append(matched[key], string(op))
					}
				}
			}
		}
		for _, tt := range []struct {
			resource string
			want     []string
		}{
			{"/serviceaccounts", []string{"UPDATE", "DELETE"}},
			{"/services", []string{"UPDATE", "DELETE"}},
			{"/configmaps", []string{"UPDATE", "DELETE"}},
			{"rbac.authorization.k8s.io/roles", []string{"UPDATE", "DELETE"}},
			{"rbac.authorization.k8s.io/rolebindings", []string{"UPDATE", "DELETE"}},
			{"apps/statefulsets", []string{"UPDATE", "DELETE"}},
			{"apps/statefulsets/scale", []string{"UPDATE"}},
			{"policy/poddisruptionbudgets", []string{"UPDATE", "DELETE"}},
			{"coordination.k8s.io/leases", []string{"UPDATE", "DELETE"}},
		} {
			t.Run(tt.resource, func(t *testing.T) {
				got := matched[tt.resource]
				slices.Sort(got)
				want := slices.Sorted(slices.Values(tt.want))
				if !slices.Equal(got, want) {
					t.Errorf("operations %v, want %v", got, want)
				}
			})
		}
		for key := range matched {
			// Status is written by the StatefulSet and disruption controllers; CREATE of an
			// object the operator does not control is no concern of it.
			if strings.HasSuffix(key, "/status") || slices.Contains(matched[key], "CREATE") {
				t.Errorf("%s %v matched: status subresources and CREATE must stay unmatched", key, matched[key])
			}
		}
	})

	t.Run("keys the operator writes", func(t *testing.T) {
		all := ""
		for _, c := range policy.Spec.MatchConditions {
			all += c.Expression + "\n"
		}
		for _, v := range policy.Spec.Variables {
			all += v.Expression + "\n"
		}
		for _, want := range []string{
			"'" + resources.LabelManagedBy + "'",
			"'" + resources.ManagerName + "'",
			"'" + resources.LabelManagedBy + "=" + resources.ManagerName + "'",
			"'" + resources.LabelInstance + "'",
			"'" + resources.AnnotationProtection + "'",
			"'" + resources.ProtectionDisabledValue + "'",
		} {
			if !strings.Contains(all, want) {
				t.Errorf("the policy's expressions do not mention %s", want)
			}
		}
	})

	t.Run("the manager's identity", func(t *testing.T) {
		ms := splitManifests(t, render(t, nil))
		var sa corev1.ServiceAccount
		decodeStrict(t, ms.ofKind(t, "ServiceAccount"), &sa)
		want := `"system:serviceaccount:` + releaseNamespace + ":" + sa.Name + `"`
		if !slices.ContainsFunc(policy.Spec.Variables, func(v admissionregistrationv1.Variable) bool {
			return v.Name == "operator" && strings.Contains(v.Expression, want)
		}) {
			t.Errorf("no variable operator allowing %s: %+v", want, policy.Spec.Variables)
		}
	})

	t.Run("exempt usernames", func(t *testing.T) {
		const extra = "system:serviceaccount:garden:gardener-resource-manager"
		policy, _ := renderProtection(t, "--set", "componentProtection.exemptUsernames={"+extra+"}")
		for _, user := range []string{extra, "system:serviceaccount:kube-system:generic-garbage-collector",
			"system:serviceaccount:kube-system:namespace-controller"} {
			if !slices.ContainsFunc(policy.Spec.Variables, func(v admissionregistrationv1.Variable) bool {
				return v.Name == "exempt" && strings.Contains(v.Expression, `"`+user+`"`)
			}) {
				t.Errorf("%s is not exempt", user)
			}
		}
	})

	t.Run("disabled", func(t *testing.T) {
		ms := splitManifests(t, render(t, nil, "--set", "componentProtection.enabled=false"))
		if _, ok := ms.named("ValidatingAdmissionPolicy", "", policy.Name); ok {
			t.Errorf("componentProtection.enabled=false still renders %s", policy.Name)
		}
	})

	t.Run("too old a cluster", func(t *testing.T) {
		_, err := runHelm(t, append(templateArgs(t, nil, "--set", "memberLeasePolicy.enabled=false", "--set", "memberReportPolicy.enabled=false", "--set", "secretOwnershipPolicy.enabled=false"), "--kube-version", "1.29.0")...)
		if err == nil || !strings.Contains(err.Error(), "componentProtection needs Kubernetes >= 1.30") {
			t.Errorf("rendering for Kubernetes 1.29: err = %v, want the version requirement", err)
		}
	})
}
