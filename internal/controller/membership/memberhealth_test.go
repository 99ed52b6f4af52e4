package membership

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/memberhealth"
	"github.com/etcd-conductor/etcd-conductor/internal/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
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
