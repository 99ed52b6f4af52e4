package ondelete

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeletable: only a view with a pod the controller could delete (outdated, not terminating)
// is worth an uncached read; anything else can only wait, whatever the apiserver holds.
func TestDeletable(t *testing.T) {
	now := metav1.Now()
	pod := func(i int, revision string, terminating bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("etcd-main-%d", i),
			Labels: map[string]string{appsv1.StatefulSetRevisionLabel: revision}}}
		if terminating {
			p.DeletionTimestamp = &now
		}
		return p
	}
	for _, tc := range []struct {
		name           string
		updateRevision string
		pods           []corev1.Pod
		want           bool
	}{
		{"settled", "r2", []corev1.Pod{pod(0, "r2", false), pod(1, "r2", false), pod(2, "r2", false)}, false},
		{"no update revision yet", "", []corev1.Pod{pod(0, "r1", false)}, false},
		{"no pods", "r2", nil, false},
		{"a pod missing, the rest current", "r2", []corev1.Pod{pod(0, "r2", false), pod(2, "r2", false)}, false},
		{"the outdated pod already terminating", "r2", []corev1.Pod{pod(0, "r1", true), pod(1, "r2", false), pod(2, "r2", false)}, false},
		{"one outdated pod", "r2", []corev1.Pod{pod(0, "r2", false), pod(1, "r1", false), pod(2, "r2", false)}, true},
		{"image bumped, all outdated", "r2", []corev1.Pod{pod(0, "r1", false), pod(1, "r1", false), pod(2, "r1", false)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main"}}
			sts.Status.UpdateRevision = tc.updateRevision
			if got := deletable(sts, tc.pods); got != tc.want {
				t.Errorf("deletable() = %t, want %t", got, tc.want)
			}
		})
	}
}
