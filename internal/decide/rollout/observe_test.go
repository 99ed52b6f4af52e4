package rollout

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
)

func waiting(reason string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
}

func etcdStatus(state corev1.ContainerState, ready bool) []corev1.ContainerStatus {
	return []corev1.ContainerStatus{
		{Name: "member-agent", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		{Name: memberpod.EtcdContainerName, Ready: ready, State: state},
	}
}

func TestClassifyContainer(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	cases := []struct {
		name     string
		phase    corev1.PodPhase
		statuses []corev1.ContainerStatus
		want     ContainerClass
	}{
		{"terminated", corev1.PodRunning, etcdStatus(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}, false), ContainerDead},
		{"CrashLoopBackOff", corev1.PodRunning, etcdStatus(waiting("CrashLoopBackOff"), false), ContainerDead},
		{"RunContainerError", corev1.PodRunning, etcdStatus(waiting("RunContainerError"), false), ContainerDead},
		{"ImagePullBackOff", corev1.PodPending, etcdStatus(waiting("ImagePullBackOff"), false), ContainerDead},
		{"ErrImagePull", corev1.PodPending, etcdStatus(waiting("ErrImagePull"), false), ContainerDead},
		{"CreateContainerConfigError", corev1.PodPending, etcdStatus(waiting("CreateContainerConfigError"), false), ContainerDead},
		{"InvalidImageName", corev1.PodPending, etcdStatus(waiting("InvalidImageName"), false), ContainerDead},
		{"CreateContainerError", corev1.PodPending, etcdStatus(waiting("CreateContainerError"), false), ContainerDead},
		{"ContainerCreating", corev1.PodPending, etcdStatus(waiting("ContainerCreating"), false), ContainerTransient},
		{"PodInitializing", corev1.PodPending, etcdStatus(waiting("PodInitializing"), false), ContainerTransient},
		{"unknown waiting reason", corev1.PodPending, etcdStatus(waiting("SomethingNew"), false), ContainerTransient},
		{"empty waiting reason", corev1.PodPending, etcdStatus(waiting(""), false), ContainerTransient},
		{"status without state", corev1.PodPending, etcdStatus(corev1.ContainerState{}, false), ContainerTransient},
		{"running and ready", corev1.PodRunning, etcdStatus(running, true), ContainerAlive},
		{"running not ready", corev1.PodRunning, etcdStatus(running, false), ContainerAlive},
		{"no status, pending", corev1.PodPending, nil, ContainerTransient},
		{"no status, no phase (just created)", "", nil, ContainerTransient},
		{"no status, failed (evicted)", corev1.PodFailed, nil, ContainerDead},
		{"no status, succeeded", corev1.PodSucceeded, nil, ContainerDead},
		{"no etcd status, running", corev1.PodRunning, etcdStatus(running, true)[:1], ContainerUnknown},
		{"no status, phase unknown", corev1.PodUnknown, nil, ContainerUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Status: corev1.PodStatus{Phase: tc.phase, ContainerStatuses: tc.statuses}}
			if got := ClassifyContainer(p); got != tc.want {
				t.Fatalf("ClassifyContainer() = %s, want %s", got, tc.want)
			}
		})
	}
}

func apiPod(name string, labels map[string]string, statuses []corev1.ContainerStatus) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shoot", UID: types.UID("uid-x" + name), ResourceVersion: "42", Labels: labels},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: statuses},
	}
}

func TestObserve(t *testing.T) {
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "shoot"},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)},
		Status:     appsv1.StatefulSetStatus{UpdateRevision: newRev, CurrentRevision: oldRev},
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	terminating := apiPod("etcd-main-1", map[string]string{appsv1.StatefulSetRevisionLabel: oldRev}, etcdStatus(running, true))
	terminating.DeletionTimestamp = &metav1.Time{}
	pods := []corev1.Pod{
		apiPod("etcd-main-2", map[string]string{appsv1.StatefulSetRevisionLabel: newRev, appsv1.PodIndexLabel: "2"}, etcdStatus(waiting("CrashLoopBackOff"), false)),
		terminating,
		apiPod("etcd-main-0", map[string]string{appsv1.StatefulSetRevisionLabel: oldRev}, etcdStatus(running, true)),
		apiPod("other-pod", nil, nil),
	}
	got := Observe(sts, pods, map[string]Role{"etcd-main-0": RoleLeader, "etcd-main-1": RoleFollower})

	want := Observed{UpdateRevision: newRev, StatefulSetReplicas: 3, Pods: []PodState{
		{Name: "other-pod", Ordinal: -1, UID: "uid-xother-pod", ResourceVersion: "42", Container: ContainerUnknown, Role: RoleUnknown},
		{Name: "etcd-main-0", Ordinal: 0, UID: "uid-xetcd-main-0", ResourceVersion: "42", Revision: oldRev, Participating: true, Container: ContainerAlive, Role: RoleLeader},
		{Name: "etcd-main-1", Ordinal: 1, UID: "uid-xetcd-main-1", ResourceVersion: "42", Revision: oldRev, Terminating: true, Participating: true, Container: ContainerAlive, Role: RoleFollower},
		{Name: "etcd-main-2", Ordinal: 2, UID: "uid-xetcd-main-2", ResourceVersion: "42", Revision: newRev, Container: ContainerDead, Role: RoleUnknown},
	}}
	if got.UpdateRevision != want.UpdateRevision || got.StatefulSetReplicas != want.StatefulSetReplicas || len(got.Pods) != len(want.Pods) {
		t.Fatalf("Observe() = %+v, want %+v", got, want)
	}
	for i := range want.Pods {
		if !reflect.DeepEqual(got.Pods[i], want.Pods[i]) {
			t.Errorf("pod %d = %+v, want %+v", i, got.Pods[i], want.Pods[i])
		}
	}
}

// TestObserveNewVolume: a pod mounting a claim of a template the StatefulSet no longer has comes
// back on a new, empty claim once deleted.
func TestObserveNewVolume(t *testing.T) {
	withClaim := func(name, template string) corev1.Pod {
		p := apiPod(name, map[string]string{appsv1.StatefulSetRevisionLabel: oldRev}, nil)
		p.Spec.Volumes = []corev1.Volume{{Name: template, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: template + "-" + name}}}}
		return p
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data-6e2a4e49"}}}},
	}
	got := Observe(sts, []corev1.Pod{withClaim("etcd-main-0", "data"), withClaim("etcd-main-1", "data-6e2a4e49"), apiPod("etcd-main-2", nil, nil)}, nil)
	for i, want := range []bool{true, false, false} {
		if got.Pods[i].NewVolume != want {
			t.Errorf("%s: NewVolume %v, want %v", got.Pods[i].Name, got.Pods[i].NewVolume, want)
		}
	}
	sts.Spec.VolumeClaimTemplates = nil
	if Observe(sts, []corev1.Pod{withClaim("etcd-main-0", "data")}, nil).Pods[0].NewVolume {
		t.Error("NewVolume without a claim template: the StatefulSet asks for no claim to move to")
	}
}

func TestPodOrdinal(t *testing.T) {
	cases := []struct {
		name   string
		labels map[string]string
		want   int
	}{
		{"etcd-main-0", nil, 0},
		{"etcd-main-12", nil, 12},
		{"etcd-main-x", nil, -1},
		{"etcd-main-01", nil, -1},
		{"etcd-main--1", nil, -1},
		{"etcd-events-0", nil, -1},
		{"renamed", map[string]string{appsv1.PodIndexLabel: "4"}, 4},
		{"etcd-main-3", map[string]string{appsv1.PodIndexLabel: "bogus"}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Labels: tc.labels}}
			if got := podOrdinal("etcd-main", p); got != tc.want {
				t.Fatalf("podOrdinal(%q) = %d, want %d", tc.name, got, tc.want)
			}
		})
	}
}

func TestObserveDefaultsReplicas(t *testing.T) {
	got := Observe(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main"}}, nil, nil)
	if got.StatefulSetReplicas != 1 || len(got.Pods) != 0 {
		t.Fatalf("Observe(empty) = %+v, want 1 replica and no pods", got)
	}
}

func TestIsOutdated(t *testing.T) {
	if IsOutdated(PodState{Revision: newRev}, newRev) {
		t.Error("pod at the update revision reported outdated")
	}
	if !IsOutdated(PodState{Revision: oldRev}, newRev) {
		t.Error("pod at an old revision not reported outdated")
	}
	if !IsOutdated(PodState{}, newRev) {
		t.Error("pod without revision label not reported outdated")
	}
}
