// Package podsecurity judges pod specs the way the apiserver's PodSecurity admission does, with
// its own evaluator (k8s.io/pod-security-admission), so a unit test can tell whether a template
// would be admitted to a namespace labelled pod-security.kubernetes.io/enforce: restricted.
package podsecurity

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// RestrictedViolations lists what keeps a pod from the latest restricted level, one
// "reason: detail" per failed check; empty means the pod is admitted.
func RestrictedViolations(meta *metav1.ObjectMeta, spec *corev1.PodSpec) ([]string, error) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the Pod Security evaluator: %w", err)
	}
	level := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	var violations []string
	for _, r := range evaluator.EvaluatePod(level, meta, spec) {
		if !r.Allowed {
			violations = append(violations, r.ForbiddenReason+": "+r.ForbiddenDetail)
		}
	}
	return violations, nil
}
