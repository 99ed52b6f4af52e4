package reportauth

import (
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Verify says why the policy named name and its binding of the same name, as read (nil: not
// found), do not authenticate the reports; "" when they do: both exist and are not being deleted,
// the policy fails closed, the binding binds it, denies, and matches everything the policy
// matches (no selector, no rules of its own).
func Verify(name string, policy *admissionregistrationv1.ValidatingAdmissionPolicy, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding) string {
	switch {
	case policy == nil:
		return fmt.Sprintf("the ValidatingAdmissionPolicy %s is not installed", name)
	case binding == nil:
		return fmt.Sprintf("the ValidatingAdmissionPolicyBinding %s is not installed", name)
	case !policy.DeletionTimestamp.IsZero():
		return fmt.Sprintf("the ValidatingAdmissionPolicy %s is being deleted", name)
	case !binding.DeletionTimestamp.IsZero():
		return fmt.Sprintf("the ValidatingAdmissionPolicyBinding %s is being deleted", name)
	case policy.Spec.FailurePolicy != nil && *policy.Spec.FailurePolicy != admissionregistrationv1.Fail:
		return fmt.Sprintf("the ValidatingAdmissionPolicy %s fails open (failurePolicy %s)", name, *policy.Spec.FailurePolicy)
	case binding.Spec.PolicyName != name:
		return fmt.Sprintf("the ValidatingAdmissionPolicyBinding %s binds policy %q, not %s", name, binding.Spec.PolicyName, name)
	case !slices.Contains(binding.Spec.ValidationActions, admissionregistrationv1.Deny):
		return fmt.Sprintf("the ValidatingAdmissionPolicyBinding %s does not deny (validationActions %v)", name, binding.Spec.ValidationActions)
	case binding.Spec.ParamRef != nil:
		return fmt.Sprintf("the ValidatingAdmissionPolicyBinding %s takes parameters the policy does not", name)
	case narrows(binding.Spec.MatchResources):
		return fmt.Sprintf("the ValidatingAdmissionPolicyBinding %s narrows what it matches (matchResources)", name)
	}
	return ""
}

// narrows: the binding matches less than its policy.
func narrows(m *admissionregistrationv1.MatchResources) bool {
	if m == nil {
		return false
	}
	return !emptySelector(m.NamespaceSelector) || !emptySelector(m.ObjectSelector) || len(m.ResourceRules) > 0 || len(m.ExcludeResourceRules) > 0
}

func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}
