package framework

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
)

// PodReady reports the pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Observe is the planner's view of a StatefulSet's pods (rollout.Observe without roles): which
// pods participate and which are outdated are then decided by the product's own rules, so a test
// never judges a rollout by a rule of its own.
func Observe(sts *appsv1.StatefulSet, pods []corev1.Pod) rollout.Observed {
	return rollout.Observe(sts, pods, nil)
}

// ObservePod is one pod as the planner sees it (participating, revision, container state).
func ObservePod(p *corev1.Pod) rollout.PodState {
	return Observe(&appsv1.StatefulSet{}, []corev1.Pod{*p}).Pods[0]
}
