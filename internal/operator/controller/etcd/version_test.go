package etcd

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

func TestStartFailures(t *testing.T) {
	now := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	const grace = 5 * time.Minute
	const target = "quay.io/coreos/etcd:v3.6.99"
	pod := func(age time.Duration, ready bool, state corev1.ContainerState) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-0", CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		p.Spec.Containers = []corev1.Container{{Name: resources.EtcdContainerName, Image: target}, {Name: resources.MemberAgentContainerName, Image: "agent"}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainerName, Ready: ready, State: state},
			{Name: resources.MemberAgentContainerName, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return p
	}
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "because"}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	terminating := pod(time.Minute, false, waiting("CrashLoopBackOff"))
	terminating.DeletionTimestamp = &metav1.Time{Time: now}

	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		// want is the failure's reason prefix; empty: no failure.
		want string
	}{
		{"image cannot be pulled", pod(10*time.Second, false, waiting("ErrImagePull")), "ErrImagePull: because"},
		{"pull backing off", pod(10*time.Second, false, waiting("ImagePullBackOff")), "ImagePullBackOff"},
		{"crash loop", pod(time.Minute, false, waiting("CrashLoopBackOff")), "CrashLoopBackOff"},
		{"container cannot be created", pod(time.Minute, false, waiting("CreateContainerError")), "CreateContainerError"},
		{"still creating", pod(10*time.Second, false, waiting("ContainerCreating")), ""},
		{"running, not ready yet", pod(time.Minute, false, running), ""},
		{"running, never ready past the bound", pod(grace+time.Second, false, running), "not Ready 5m1s after its creation"},
		{"exited once: the kubelet restarts it", pod(time.Minute, false, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}), ""},
		{"ready", pod(time.Hour, true, running), ""},
		{"terminating", terminating, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := startFailures([]corev1.Pod{tc.pod}, now, grace)
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("failures %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Pod != "etcd-0" || got[0].Image != target || !strings.HasPrefix(got[0].Reason, tc.want) {
				t.Fatalf("failures %+v, want etcd-0 on %s with %q", got, target, tc.want)
			}
		})
	}
}
