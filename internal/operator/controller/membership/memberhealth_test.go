package membership

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/memberhealth"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// HealthObserve takes NotReady time from the status members' lastTransitionTime, pod age from the
// pod, voter and heard from etcd's member list and the leader's view, and counts every
// operation in flight, this controller's own scaling too. status.members name etcd members
// (<prefix>-<pod> with spec.memberNamePrefix) and are matched with their pods and member list
// entries by pod; a status entry of no pod of this Etcd is left out.
func TestHealthObserve(t *testing.T) {
	for _, prefix := range []*string{nil, ptr.To("p")} {
		t.Run(fmt.Sprintf("prefix %q", ptr.Deref(prefix, "")), func(t *testing.T) { testHealthObserve(t, prefix) })
	}
}

func testHealthObserve(t *testing.T, prefix *string) {
	now := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{MemberNamePrefix: prefix}}
	name := func(pod string) string { return resources.MemberNameOf(etcd, pod) }
	etcd.Status.Members = []druidv1alpha1.EtcdMemberStatus{
		{Name: name("main-0"), Status: druidv1alpha1.EtcdMemberStatusReady, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))},
		{Name: name("main-1"), Status: druidv1alpha1.EtcdMemberStatusNotReady, Reason: "UnknownGracePeriodExceeded", LastTransitionTime: metav1.NewTime(now.Add(-6 * time.Minute))},
		{Name: name("main-2"), Status: druidv1alpha1.EtcdMemberStatusNotReady, Reason: "PodNotFound", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))},
		{Name: "other-0", Status: druidv1alpha1.EtcdMemberStatusNotReady, Reason: "PodNotFound", LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))},
	}
	etcd.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeScaleOperationInProgress, Status: druidv1alpha1.ConditionTrue}}
	pod := func(name string, age time.Duration) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
	}
	gone := pod("main-2", time.Hour)
	gone.DeletionTimestamp = &metav1.Time{Time: now}
	mo := membership.Observed{MembersKnown: true, HeardKnown: true, Members: []membership.Member{
		{ID: 1, Name: "main-0", Heard: true, Leader: true}, {ID: 2, Name: "main-1"}, {ID: 3, Name: "main-2", Learner: true},
	}}
	o := HealthObserve(etcd, []corev1.Pod{pod("main-0", time.Hour), pod("main-1", 10*time.Minute), gone}, mo, now, 5*time.Minute)
	if o.Voters != 2 || !o.MembersKnown || !o.HeardKnown || o.NotReadyGrace != 5*time.Minute || !o.Operations.Has(operation.KindScale) {
		t.Fatalf("observed %+v", o)
	}
	want := []memberhealth.Member{
		{Name: "main-0", Pod: true, PodAge: time.Hour, Voter: true, Heard: true},
		{Name: "main-1", NotReady: true, Reason: "UnknownGracePeriodExceeded", NotReadyFor: 6 * time.Minute, Pod: true, PodAge: 10 * time.Minute, Voter: true},
		{Name: "main-2", NotReady: true, Reason: "PodNotFound", NotReadyFor: time.Minute},
	}
	for i, w := range want {
		if o.Members[i] != w {
			t.Errorf("member %d = %+v, want %+v", i, o.Members[i], w)
		}
	}
}

// TestHealthObservePodReadyNow: the status is a few seconds old, the pod's readiness is newer. A
// member recorded NotReady for its pod's sake whose pod is Ready now is not NotReady (it just
// recovered); one NotReady because its Lease expired stays so whatever its pod says.
func TestHealthObservePodReadyNow(t *testing.T) {
	now := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name         string
		reason       string
		podReady     bool
		wantNotReady bool
	}{
		{"pod not ready, still", "ContainerNotReady", false, true},
		{"pod Ready since the status was written", "ContainerNotReady", true, false},
		{"just promoted, pod Ready now", "PromotedReadinessPending", true, false},
		{"Lease expired past the grace, pod Ready", "UnknownGracePeriodExceeded", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
			etcd.Status.Members = []druidv1alpha1.EtcdMemberStatus{{Name: "main-0", Status: druidv1alpha1.EtcdMemberStatusNotReady,
				Reason: tt.reason, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
			pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "main-0", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
			ready := corev1.ConditionFalse
			if tt.podReady {
				ready = corev1.ConditionTrue
			}
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
			o := HealthObserve(etcd, []corev1.Pod{pod}, membership.Observed{}, now, 20*time.Second)
			if got := o.Members[0].NotReady; got != tt.wantNotReady {
				t.Errorf("NotReady %v, want %v", got, tt.wantNotReady)
			}
		})
	}
}

// TestHealthObserveEtcdRestartedByKubelet: a pod's age for scenario 9 counts from its etcd
// container's last start when the kubelet restarted it (a failed liveness probe): that member is
// being restarted already and gets its grace again.
func TestHealthObserveEtcdRestartedByKubelet(t *testing.T) {
	now := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name    string
		started time.Time // zero: the container does not run
		want    time.Duration
	}{
		{"never restarted", now.Add(-time.Hour), time.Hour},
		{"restarted 5s ago", now.Add(-5 * time.Second), 5 * time.Second},
		{"not running", time.Time{}, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
			etcd.Status.Members = []druidv1alpha1.EtcdMemberStatus{{Name: "main-0", Status: druidv1alpha1.EtcdMemberStatusNotReady,
				Reason: "ContainerNotReady", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
			pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "main-0", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
			cs := corev1.ContainerStatus{Name: resources.EtcdContainerName}
			if !tt.started.IsZero() {
				cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(tt.started)}
			}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
			o := HealthObserve(etcd, []corev1.Pod{pod}, membership.Observed{}, now, 20*time.Second)
			if got := o.Members[0].PodAge; got != tt.want {
				t.Errorf("pod age %s, want %s", got, tt.want)
			}
		})
	}
}
