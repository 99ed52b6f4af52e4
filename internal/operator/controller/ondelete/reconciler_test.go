package ondelete

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
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

// TestStartedWithin: a replaced member is asked for its read at the fast pace only while its
// etcd has just started; one that has run for a while without serving is stuck.
func TestStartedWithin(t *testing.T) {
	now := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	pod := func(name, container string, started time.Duration) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: container, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-started))}}}}}}
	}
	for _, tc := range []struct {
		name  string
		pods  []corev1.Pod
		names []string
		want  bool
	}{
		{"just started", []corev1.Pod{pod("etcd-main-0", resources.EtcdContainerName, 3*time.Second)}, []string{"etcd-main-0"}, true},
		{"running for long", []corev1.Pod{pod("etcd-main-0", resources.EtcdContainerName, 2*time.Minute)}, []string{"etcd-main-0"}, false},
		{"only the named pods count", []corev1.Pod{pod("etcd-main-0", resources.EtcdContainerName, 2*time.Minute), pod("etcd-main-1", resources.EtcdContainerName, time.Second)},
			[]string{"etcd-main-0"}, false},
		{"only the etcd container counts", []corev1.Pod{pod("etcd-main-0", "member-agent", time.Second)}, []string{"etcd-main-0"}, false},
		{"nobody awaited", []corev1.Pod{pod("etcd-main-0", resources.EtcdContainerName, time.Second)}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := startedWithin(tc.pods, tc.names, now, rejoinPollWindow); got != tc.want {
				t.Errorf("startedWithin() = %t, want %t", got, tc.want)
			}
		})
	}
}
