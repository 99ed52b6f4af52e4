package status

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

var now = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

type member struct {
	revision string
	ready    bool
	leaseAge time.Duration // < 0: never renewed
	role     string
	missing  bool
	deleting bool
}

func observed(strategy appsv1.StatefulSetUpdateStrategyType, members ...member) Inputs {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{Replicas: int32(len(members))}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Generation: 2}}
	sts.Spec.UpdateStrategy.Type = strategy
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdateRevision: "rev-new", CurrentRevision: "rev-old", CurrentReplicas: 0}
	o := Inputs{Etcd: etcd, StatefulSet: sts, Now: now}
	for i, m := range members {
		name := fmt.Sprintf("etcd-main-%d", i)
		if !m.missing {
			ready := corev1.ConditionFalse
			if m.ready {
				ready = corev1.ConditionTrue
			}
			pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{appsv1.StatefulSetRevisionLabel: m.revision}}}
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
			if m.deleting {
				pod.DeletionTimestamp = &metav1.Time{Time: now}
			}
			o.Pods = append(o.Pods, pod)
		}
		lease := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
		lease.Spec.LeaseDurationSeconds = ptr.To(resources.LeaseDurationSeconds)
		if m.leaseAge >= 0 {
			lease.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-m.leaseAge)}
			lease.Spec.HolderIdentity = ptr.To(fmt.Sprintf("%x:cafe:%s", i+10, m.role))
		}
		o.Leases = append(o.Leases, lease)
	}
	return o
}

func cond(s druidv1alpha1.EtcdStatus, t druidv1alpha1.ConditionType) druidv1alpha1.Condition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return druidv1alpha1.Condition{}
}

func TestCompute(t *testing.T) {
	healthy := member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Member"}
	leader := member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Leader"}
	outdated := member{revision: "rev-old", ready: true, leaseAge: time.Second, role: "Member"}
	down := member{revision: "rev-old", ready: false, leaseAge: time.Minute, role: "Member"}
	expired := member{revision: "rev-new", ready: true, leaseAge: time.Minute, role: "Member"}

	for _, tt := range []struct {
		name                  string
		o                     Inputs
		wantReady, wantUpdate druidv1alpha1.ConditionStatus
		wantAllReady          druidv1alpha1.ConditionStatus
		wantReadyReason       string
		wantCurrent           int32
	}{
		{"all updated and healthy", observed(appsv1.OnDeleteStatefulSetStrategyType, leader, healthy, healthy),
			druidv1alpha1.ConditionTrue, druidv1alpha1.ConditionTrue, druidv1alpha1.ConditionTrue, ReasonQuorate, 3},
		{"currentReplicas from pod revisions under OnDelete", observed(appsv1.OnDeleteStatefulSetStrategyType, leader, healthy, outdated),
			druidv1alpha1.ConditionTrue, druidv1alpha1.ConditionFalse, druidv1alpha1.ConditionTrue, ReasonQuorate, 2},
		{"one down keeps quorum", observed(appsv1.OnDeleteStatefulSetStrategyType, leader, healthy, down),
			druidv1alpha1.ConditionTrue, druidv1alpha1.ConditionFalse, druidv1alpha1.ConditionFalse, ReasonQuorate, 2},
		{"two down loses quorum", observed(appsv1.OnDeleteStatefulSetStrategyType, leader, down, down),
			druidv1alpha1.ConditionFalse, druidv1alpha1.ConditionFalse, druidv1alpha1.ConditionFalse, etcdstatus.ReasonQuorumLost, 1},
		{"expired lease is not a ready member", observed(appsv1.OnDeleteStatefulSetStrategyType, leader, expired, expired),
			druidv1alpha1.ConditionFalse, druidv1alpha1.ConditionTrue, druidv1alpha1.ConditionFalse, etcdstatus.ReasonQuorumLost, 3},
		{"missing pod", observed(appsv1.RollingUpdateStatefulSetStrategyType, leader, healthy, member{missing: true, leaseAge: -1}),
			druidv1alpha1.ConditionTrue, druidv1alpha1.ConditionFalse, druidv1alpha1.ConditionFalse, ReasonQuorate, 2},
		{"terminating pod is not updated", observed(appsv1.OnDeleteStatefulSetStrategyType, leader, healthy, member{revision: "rev-new", deleting: true, leaseAge: -1}),
			druidv1alpha1.ConditionTrue, druidv1alpha1.ConditionFalse, druidv1alpha1.ConditionFalse, ReasonQuorate, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.o)
			if c := cond(got, druidv1alpha1.ConditionTypeReady); c.Status != tt.wantReady || c.Reason != tt.wantReadyReason {
				t.Errorf("Ready = %s/%s (%s), want %s/%s", c.Status, c.Reason, c.Message, tt.wantReady, tt.wantReadyReason)
			}
			if c := cond(got, druidv1alpha1.ConditionTypeAllMembersUpdated); c.Status != tt.wantUpdate {
				t.Errorf("AllMembersUpdated = %s (%s), want %s", c.Status, c.Message, tt.wantUpdate)
			}
			if c := cond(got, druidv1alpha1.ConditionTypeAllMembersReady); c.Status != tt.wantAllReady {
				t.Errorf("AllMembersReady = %s (%s), want %s", c.Status, c.Message, tt.wantAllReady)
			}
			if got.CurrentReplicas != tt.wantCurrent {
				t.Errorf("currentReplicas = %d, want %d", got.CurrentReplicas, tt.wantCurrent)
			}
		})
	}
}

// TestComputeRefusesOutOfBoundsInput: replicas the operator does not accept and pods with
// ordinals no member has (names a user or a bug can create) must give a clear condition or be
// ignored, never an allocation sized by them.
func TestComputeRefusesOutOfBoundsInput(t *testing.T) {
	healthy := member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Member"}
	withReplicas := func(n int32) Inputs {
		o := observed(appsv1.OnDeleteStatefulSetStrategyType, healthy, healthy, healthy)
		o.Etcd.Spec.Replicas = n
		return o
	}
	for _, replicas := range []int32{druidv1alpha1.MaxReplicas + 2, math.MaxInt32, -1} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			o := withReplicas(replicas)
			got := Compute(o)
			for _, ct := range []druidv1alpha1.ConditionType{druidv1alpha1.ConditionTypeReady, druidv1alpha1.ConditionTypeAllMembersReady, druidv1alpha1.ConditionTypeAllMembersUpdated} {
				c := cond(got, ct)
				if c.Reason != ReasonInvalidReplicas || c.Status == druidv1alpha1.ConditionTrue ||
					!strings.Contains(c.Message, fmt.Sprintf("spec.replicas is %d", replicas)) || !strings.Contains(c.Message, "up to 9") {
					t.Errorf("%s = %s/%s (%s), want a refusal naming spec.replicas and the bound", ct, c.Status, c.Reason, c.Message)
				}
			}
			if len(got.Members) != 0 || got.Ready == nil || *got.Ready {
				t.Errorf("members = %d, ready = %v; want none and false", len(got.Members), got.Ready)
			}
			if got.Replicas != 3 {
				t.Errorf("replicas = %d, want the 3 pods that exist", got.Replicas)
			}
			if allocs := testing.AllocsPerRun(3, func() { Compute(o) }); allocs > 500 {
				t.Errorf("Compute allocated %v times", allocs)
			}
		})
	}
	t.Run("more member pods than the bound", func(t *testing.T) {
		o := observed(appsv1.OnDeleteStatefulSetStrategyType, healthy, healthy, healthy)
		for i := len(o.Pods); i <= druidv1alpha1.MaxReplicas; i++ {
			extra := o.Pods[0].DeepCopy()
			extra.Name = fmt.Sprintf("impostor-%d", i)
			o.Pods = append(o.Pods, *extra)
		}
		got := Compute(o)
		if c := cond(got, druidv1alpha1.ConditionTypeReady); c.Reason != ReasonTooManyMemberPods || c.Status != druidv1alpha1.ConditionFalse ||
			!strings.Contains(c.Message, "10 pods carry the member labels; an Etcd has at most 9 members") {
			t.Fatalf("Ready = %+v, want a TooManyMemberPods refusal", c)
		}
		if len(got.Members) != 0 {
			t.Errorf("members = %+v, want none", got.Members)
		}
	})
	t.Run("pod with a huge ordinal", func(t *testing.T) {
		o := observed(appsv1.OnDeleteStatefulSetStrategyType, healthy, healthy, healthy)
		stray := o.Pods[0].DeepCopy()
		stray.Name = "etcd-main-2147483646"
		stray.Labels[appsv1.PodIndexLabel] = "2147483646"
		o.Pods = append(o.Pods, *stray)
		got := Compute(o)
		if len(got.Members) != 3 || cond(got, druidv1alpha1.ConditionTypeReady).Status != druidv1alpha1.ConditionTrue {
			t.Fatalf("members %d, Ready %+v: the stray pod must not change the member list", len(got.Members), cond(got, druidv1alpha1.ConditionTypeReady))
		}
	})
}

func TestComputeMembers(t *testing.T) {
	o := observed(appsv1.OnDeleteStatefulSetStrategyType,
		member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Leader"},
		member{revision: "rev-new", ready: false, leaseAge: time.Second, role: "Member"},
		member{revision: "rev-new", ready: true, leaseAge: time.Hour, role: "Member"})
	got := Compute(o).Members
	want := []struct {
		status druidv1alpha1.EtcdMemberConditionStatus
		reason string
		role   druidv1alpha1.EtcdRole
	}{
		{druidv1alpha1.EtcdMemberStatusReady, etcdstatus.MemberReasonLeaseSucceeded, druidv1alpha1.EtcdRoleLeader},
		{druidv1alpha1.EtcdMemberStatusNotReady, etcdstatus.MemberReasonPodNotReady, druidv1alpha1.EtcdRoleMember},
		{druidv1alpha1.EtcdMemberStatusUnknown, etcdstatus.MemberReasonLeaseExpired, druidv1alpha1.EtcdRoleMember},
	}
	for i, w := range want {
		m := got[i]
		if m.Status != w.status || m.Reason != w.reason || m.Role == nil || *m.Role != w.role || m.ID == nil {
			t.Errorf("member %d = %+v, want %+v", i, m, w)
		}
	}
}

// TestComputeMembersByMemberName: with spec.memberNamePrefix status.members lists the members by
// their etcd names, <prefix>-<pod> (etcd-druid's), each with what the Lease of that name and its
// pod say; a Lease named as the bare pod is no member's.
func TestComputeMembersByMemberName(t *testing.T) {
	o := observed(appsv1.OnDeleteStatefulSetStrategyType,
		member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Leader"},
		member{revision: "rev-new", ready: false, leaseAge: time.Second, role: "Member"},
		member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Member"})
	o.Etcd.Spec.MemberNamePrefix = ptr.To("p")
	for i := range o.Leases[:2] {
		o.Leases[i].Name = resources.MemberNameOf(o.Etcd, o.Leases[i].Name)
	}
	got := Compute(o).Members
	want := []struct {
		name   string
		status druidv1alpha1.EtcdMemberConditionStatus
		role   *druidv1alpha1.EtcdRole
	}{
		{"p-etcd-main-0", druidv1alpha1.EtcdMemberStatusReady, ptr.To(druidv1alpha1.EtcdRoleLeader)},
		{"p-etcd-main-1", druidv1alpha1.EtcdMemberStatusNotReady, ptr.To(druidv1alpha1.EtcdRoleMember)},
		{"p-etcd-main-2", druidv1alpha1.EtcdMemberStatusUnknown, nil}, // its Lease is under the bare pod name
	}
	if len(got) != len(want) {
		t.Fatalf("members %+v", got)
	}
	for i, w := range want {
		m := got[i]
		if m.Name != w.name || m.Status != w.status || (m.Role == nil) != (w.role == nil) || (m.Role != nil && *m.Role != *w.role) {
			t.Errorf("member %d = %+v, want %+v", i, m, w)
		}
	}
}

func TestComputeIsStableWhenNothingChanged(t *testing.T) {
	o := observed(appsv1.OnDeleteStatefulSetStrategyType, member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Leader"})
	first := Compute(o)
	o.Etcd.Status = first
	o.Now = now.Add(time.Minute)
	o.Leases[0].Spec.RenewTime = &metav1.MicroTime{Time: o.Now}
	second := Compute(o)
	for i := range first.Conditions {
		if !first.Conditions[i].LastUpdateTime.Equal(&second.Conditions[i].LastUpdateTime) {
			t.Errorf("condition %s was rewritten although unchanged", first.Conditions[i].Type)
		}
	}
}

func TestAllMembersUpdatedCarriesRolloutDecision(t *testing.T) {
	o := observed(appsv1.OnDeleteStatefulSetStrategyType,
		member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Leader"},
		member{revision: "rev-old", ready: true, leaseAge: time.Second, role: "Member"},
		member{revision: "rev-new", ready: false, leaseAge: time.Second, role: "Member"})
	o.Etcd.Status.LastOperation = &druidv1alpha1.LastOperation{Type: etcdstatus.OperationRollout, RunID: "rev-new",
		Description: "waiting for etcd-main-2 (updated) to rejoin the quorum [rollout/wait/updated-not-participating]"}
	c := cond(Compute(o), druidv1alpha1.ConditionTypeAllMembersUpdated)
	if !strings.Contains(c.Message, "waiting for etcd-main-2") || !strings.Contains(c.Message, "2/3") {
		t.Errorf("message = %q", c.Message)
	}
	o.Etcd.Status.LastOperation.RunID = "rev-older"
	if c := cond(Compute(o), druidv1alpha1.ConditionTypeAllMembersUpdated); strings.Contains(c.Message, "waiting") {
		t.Errorf("a decision for another revision leaked into the message: %q", c.Message)
	}
}

// During a scale-out 1→3 the one voter is a quorum: the learner being added and the ordinal the
// StatefulSet has not grown to yet do not count against it.
func TestComputeReadyCountsVotersOnly(t *testing.T) {
	leader := member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Leader"}
	learner := member{revision: "rev-new", ready: false, leaseAge: time.Second, role: "Learner"}
	follower := member{revision: "rev-new", ready: false, leaseAge: time.Second, role: "Member"}
	for _, tt := range []struct {
		name        string
		stsReplicas *int32
		members     []member
		want        druidv1alpha1.ConditionStatus
		message     string
	}{
		{"learner added, third not yet", ptr.To[int32](2), []member{leader, learner, {missing: true, leaseAge: -1}}, druidv1alpha1.ConditionTrue, "1/1 members ready, quorum is 1"},
		{"StatefulSet not grown yet", ptr.To[int32](1), []member{leader, {missing: true, leaseAge: -1}, {missing: true, leaseAge: -1}}, druidv1alpha1.ConditionTrue, "1/1 members ready, quorum is 1"},
		{"a voter down counts", ptr.To[int32](3), []member{leader, follower, follower}, druidv1alpha1.ConditionFalse, "1/3 members ready, quorum needs 2"},
		// 1→3: the learner's pod is in its init step, its Lease still empty: no voter.
		{"a joining member with an empty Lease", ptr.To[int32](2), []member{leader, {revision: "rev-new", leaseAge: -1}, {missing: true, leaseAge: -1}}, druidv1alpha1.ConditionTrue, "1/1 members ready, quorum is 1"},
		// A recorded voter whose Lease is empty (its pod restarting) still counts.
		{"a recorded voter with an empty Lease", ptr.To[int32](3), []member{leader, {revision: "rev-new", leaseAge: -1}, {revision: "rev-new", leaseAge: -1}}, druidv1alpha1.ConditionFalse, "1/3 members ready, quorum needs 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := observed(appsv1.OnDeleteStatefulSetStrategyType, tt.members...)
			o.StatefulSet.Spec.Replicas = tt.stsReplicas
			// The leader's member list as the membership controller recorded it: every member
			// with a role in its Lease, and for the restart case all three.
			for i, m := range tt.members {
				if m.role != "" && m.role != "Learner" || tt.name == "a recorded voter with an empty Lease" {
					o.Etcd.Status.Voters = append(o.Etcd.Status.Voters, druidv1alpha1.RecordedVoter{Name: fmt.Sprintf("etcd-main-%d", i)})
				}
			}
			out := Compute(o)
			got := cond(out, druidv1alpha1.ConditionTypeReady)
			if got.Status != tt.want || got.Message != tt.message {
				t.Errorf("Ready = %s %q, want %s %q", got.Status, got.Message, tt.want, tt.message)
			}
			// clusterSize is the voters Ready counted (the "n" of "k/n members ready").
			if n := out.ClusterSize; n == nil || !strings.Contains(got.Message, fmt.Sprintf("/%d members", *n)) {
				t.Errorf("clusterSize %v, Ready %q", n, got.Message)
			}
		})
	}
}

// DEP-01 scenario 7: a member Unknown (Lease expired, pod Ready) turns NotReady with reason
// UnknownGracePeriodExceeded only once it has been Unknown longer than the grace, stays so with
// the time it turned NotReady while its Lease stays expired, and is Ready again once renewed.
func TestComputeUnknownPastGraceTurnsNotReady(t *testing.T) {
	const grace = 90 * time.Second
	o := observed(appsv1.OnDeleteStatefulSetStrategyType,
		member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Leader"},
		member{revision: "rev-new", ready: true, leaseAge: time.Hour, role: "Member"},
		member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Member"})
	o.UnknownGrace = grace
	step := func(at time.Time) druidv1alpha1.EtcdMemberStatus {
		o.Now = at
		o.Leases[0].Spec.RenewTime = &metav1.MicroTime{Time: at}
		o.Leases[2].Spec.RenewTime = &metav1.MicroTime{Time: at}
		o.Etcd.Status = Compute(o)
		return o.Etcd.Status.Members[1]
	}
	m := step(now)
	if m.Status != druidv1alpha1.EtcdMemberStatusUnknown || m.Reason != etcdstatus.MemberReasonLeaseExpired {
		t.Fatalf("as soon as the Lease expired: %s/%s, want Unknown/%s", m.Status, m.Reason, etcdstatus.MemberReasonLeaseExpired)
	}
	if m = step(now.Add(grace)); m.Status != druidv1alpha1.EtcdMemberStatusUnknown {
		t.Fatalf("Unknown for exactly the grace: %s/%s, want still Unknown", m.Status, m.Reason)
	}
	turned := now.Add(grace + time.Second)
	if m = step(turned); m.Status != druidv1alpha1.EtcdMemberStatusNotReady || m.Reason != etcdstatus.MemberReasonUnknownGracePeriodExceeded ||
		!m.LastTransitionTime.Time.Equal(turned) {
		t.Fatalf("Unknown past the grace: %s/%s since %s, want NotReady/%s since %s", m.Status, m.Reason, m.LastTransitionTime, etcdstatus.MemberReasonUnknownGracePeriodExceeded, turned)
	}
	if m = step(turned.Add(10 * time.Minute)); m.Status != druidv1alpha1.EtcdMemberStatusNotReady ||
		m.Reason != etcdstatus.MemberReasonUnknownGracePeriodExceeded || !m.LastTransitionTime.Time.Equal(turned) {
		t.Fatalf("still expired later: %s/%s since %s, want NotReady/%s since %s", m.Status, m.Reason, m.LastTransitionTime, etcdstatus.MemberReasonUnknownGracePeriodExceeded, turned)
	}
	o.Leases[1].Spec.RenewTime = &metav1.MicroTime{Time: turned.Add(11 * time.Minute)}
	if m = step(turned.Add(11 * time.Minute)); m.Status != druidv1alpha1.EtcdMemberStatusReady {
		t.Fatalf("Lease renewed: %s/%s, want Ready", m.Status, m.Reason)
	}
	// Without a grace configured, etcd-druid's default applies.
	o.UnknownGrace = 0
	o.Etcd.Status.Members[1] = druidv1alpha1.EtcdMemberStatus{Name: "etcd-main-1", Status: druidv1alpha1.EtcdMemberStatusUnknown,
		LastTransitionTime: metav1.NewTime(now)}
	o.Leases[1].Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-time.Hour)}
	o.Now = now.Add(DefaultUnknownGrace - time.Second)
	if m = Compute(o).Members[1]; m.Status != druidv1alpha1.EtcdMemberStatusUnknown {
		t.Fatalf("within the default grace: %s/%s, want Unknown", m.Status, m.Reason)
	}
	o.Now = now.Add(DefaultUnknownGrace + time.Second)
	if m = Compute(o).Members[1]; m.Status != druidv1alpha1.EtcdMemberStatusNotReady {
		t.Fatalf("past the default grace: %s/%s, want NotReady", m.Status, m.Reason)
	}
}

// TestJustPromotedMemberCountsTowardsQuorum: a member whose Lease said learner at the last look
// and says it votes now was just promoted; its pod is not Ready only until its readiness probe
// runs again. For promotionGrace it counts towards the quorum (no false QuorumLost during a
// scale-out from one member), never longer, and never for a voter that was NotReady before.
func TestJustPromotedMemberCountsTowardsQuorum(t *testing.T) {
	leader := member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Leader"}
	for _, tt := range []struct {
		name       string
		prev       *druidv1alpha1.EtcdMemberStatus // the promoted member at the last look (nil: none)
		leaseAge   time.Duration
		wantReason string
		wantReady  druidv1alpha1.ConditionStatus
	}{
		{"promoted since the last look", &druidv1alpha1.EtcdMemberStatus{Role: ptr.To(druidv1alpha1.EtcdRoleLearner),
			Status: druidv1alpha1.EtcdMemberStatusNotReady, Reason: etcdstatus.MemberReasonPodNotReady, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))},
			time.Second, etcdstatus.MemberReasonPromotionPending, druidv1alpha1.ConditionTrue},
		{"within the grace", &druidv1alpha1.EtcdMemberStatus{Role: ptr.To(druidv1alpha1.EtcdRoleMember),
			Status: druidv1alpha1.EtcdMemberStatusNotReady, Reason: etcdstatus.MemberReasonPromotionPending, LastTransitionTime: metav1.NewTime(now.Add(-promotionGrace / 2))},
			time.Second, etcdstatus.MemberReasonPromotionPending, druidv1alpha1.ConditionTrue},
		{"the grace is over", &druidv1alpha1.EtcdMemberStatus{Role: ptr.To(druidv1alpha1.EtcdRoleMember),
			Status: druidv1alpha1.EtcdMemberStatusNotReady, Reason: etcdstatus.MemberReasonPromotionPending, LastTransitionTime: metav1.NewTime(now.Add(-promotionGrace - time.Second))},
			time.Second, etcdstatus.MemberReasonPodNotReady, druidv1alpha1.ConditionFalse},
		{"a voter NotReady before (a restart) gets no grace", &druidv1alpha1.EtcdMemberStatus{Role: ptr.To(druidv1alpha1.EtcdRoleMember),
			Status: druidv1alpha1.EtcdMemberStatusNotReady, Reason: etcdstatus.MemberReasonPodNotReady, LastTransitionTime: metav1.NewTime(now.Add(-time.Second))},
			time.Second, etcdstatus.MemberReasonPodNotReady, druidv1alpha1.ConditionFalse},
		{"no earlier status (an operator restart) gives no grace", nil, time.Second, etcdstatus.MemberReasonPodNotReady, druidv1alpha1.ConditionFalse},
		{"an expired Lease gets no grace", &druidv1alpha1.EtcdMemberStatus{Role: ptr.To(druidv1alpha1.EtcdRoleLearner),
			Status: druidv1alpha1.EtcdMemberStatusNotReady, Reason: etcdstatus.MemberReasonPodNotReady, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))},
			time.Minute, etcdstatus.MemberReasonPodNotReady, druidv1alpha1.ConditionFalse},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Three members, one of them down: the quorum of two needs the promoted one.
			o := observed(appsv1.OnDeleteStatefulSetStrategyType, leader,
				member{revision: "rev-new", ready: false, leaseAge: tt.leaseAge, role: "Member"},
				member{revision: "rev-new", ready: false, leaseAge: time.Minute, role: "Member"})
			if tt.prev != nil {
				prev := *tt.prev
				prev.Name = "etcd-main-1"
				o.Etcd.Status.Members = []druidv1alpha1.EtcdMemberStatus{
					{Name: "etcd-main-0", Role: ptr.To(druidv1alpha1.EtcdRoleLeader), Status: druidv1alpha1.EtcdMemberStatusReady, Reason: etcdstatus.MemberReasonLeaseSucceeded},
					prev,
				}
			}
			got := Compute(o)
			if m := got.Members[1]; m.Status != druidv1alpha1.EtcdMemberStatusNotReady || m.Reason != tt.wantReason {
				t.Errorf("member %s/%s, want NotReady/%s", m.Status, m.Reason, tt.wantReason)
			}
			if c := cond(got, druidv1alpha1.ConditionTypeReady); c.Status != tt.wantReady {
				t.Errorf("Ready %s/%s (%s), want %s", c.Status, c.Reason, c.Message, tt.wantReady)
			}
		})
	}
}
