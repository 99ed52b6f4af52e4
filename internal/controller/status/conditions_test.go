package status

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/rollout"
)

func TestReadyCondition(t *testing.T) {
	for _, tc := range []struct {
		replicas, voters, ready int
		status                  druidv1alpha1.ConditionStatus
		reason, message         string
	}{
		{0, 0, 0, druidv1alpha1.ConditionFalse, ReasonNoMembers, "spec.replicas is 0"},
		{3, 0, 0, druidv1alpha1.ConditionFalse, ReasonNoMembers, "no voting member has a pod yet"},
		{1, 1, 1, druidv1alpha1.ConditionTrue, ReasonQuorate, "1/1 members ready, quorum is 1"},
		{3, 3, 2, druidv1alpha1.ConditionTrue, ReasonQuorate, "2/3 members ready, quorum is 2"},
		{3, 3, 1, druidv1alpha1.ConditionFalse, ReasonQuorumLost, "1/3 members ready, quorum needs 2"},
		{5, 5, 2, druidv1alpha1.ConditionFalse, ReasonQuorumLost, "2/5 members ready, quorum needs 3"},
		{3, 1, 1, druidv1alpha1.ConditionTrue, ReasonQuorate, "1/1 members ready, quorum is 1"}, // 1→3, nothing added yet
	} {
		t.Run(tc.message, func(t *testing.T) {
			c := readyCondition(tc.replicas, tc.voters, tc.ready)
			if c.Type != druidv1alpha1.ConditionTypeReady || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message {
				t.Fatalf("readyCondition(%d, %d, %d) = %+v", tc.replicas, tc.voters, tc.ready, c)
			}
		})
	}
}

func TestAllMembersReadyCondition(t *testing.T) {
	ready := druidv1alpha1.EtcdMemberStatus{Name: "etcd-main-0", Status: druidv1alpha1.EtcdMemberStatusReady}
	expired := druidv1alpha1.EtcdMemberStatus{Name: "etcd-main-1", Status: druidv1alpha1.EtcdMemberStatusUnknown, Reason: MemberReasonLeaseExpired}
	for _, tc := range []struct {
		name    string
		members []druidv1alpha1.EtcdMemberStatus
		status  druidv1alpha1.ConditionStatus
		reason  string
		message string
	}{
		{"all ready", []druidv1alpha1.EtcdMemberStatus{ready}, druidv1alpha1.ConditionTrue, ReasonAllMembersReady, "all members are ready"},
		{"one not ready", []druidv1alpha1.EtcdMemberStatus{ready, expired}, druidv1alpha1.ConditionFalse, ReasonNotAllMembersReady, "not ready: etcd-main-1 (LeaseExpired)"},
		{"no members", nil, druidv1alpha1.ConditionFalse, ReasonNotAllMembersReady, "no members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := allMembersReadyCondition(tc.members)
			if c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message {
				t.Fatalf("allMembersReadyCondition() = %+v", c)
			}
		})
	}
}

func TestAllMembersUpdatedCondition(t *testing.T) {
	healthy := member{revision: "rev-new", ready: true, leaseAge: time.Second, role: "Member"}
	outdated := member{revision: "rev-old", ready: true, leaseAge: time.Second, role: "Member"}
	rejoining := member{revision: "rev-new", ready: false, leaseAge: time.Second, role: "Member"}
	waiting := &druidv1alpha1.LastOperation{Type: OperationRollout, RunID: "rev-new",
		Description: "waiting for etcd-main-2 (updated) to rejoin the quorum [wait/updated-not-participating]"}
	deleting := &druidv1alpha1.LastOperation{Type: OperationRollout, RunID: "rev-new",
		Description: "deleting etcd-main-1 (follower, outdated): every updated pod participates; 3/3 participating, 1 outdated [participating/follower] (roles: direct)"}
	staleDone := &druidv1alpha1.LastOperation{Type: OperationRollout, RunID: "rev-new", Description: "all 3 pods run revision rev-new [done]"}
	olderRevision := &druidv1alpha1.LastOperation{Type: OperationRollout, RunID: "rev-old", Description: waiting.Description}
	for _, tc := range []struct {
		name     string
		strategy appsv1.StatefulSetUpdateStrategyType
		members  []member
		op       *druidv1alpha1.LastOperation
		noSts    bool
		lagging  bool
		status   druidv1alpha1.ConditionStatus
		reason   string
		message  string
	}{
		{name: "all updated", strategy: appsv1.OnDeleteStatefulSetStrategyType, members: []member{healthy, healthy, healthy}, op: staleDone,
			status: druidv1alpha1.ConditionTrue, reason: ReasonAllMembersUpdated, message: "all 3 members run revision rev-new"},
		{name: "waiting rule is the reason", strategy: appsv1.OnDeleteStatefulSetStrategyType, members: []member{healthy, outdated, rejoining}, op: waiting,
			status: druidv1alpha1.ConditionFalse, reason: "WaitUpdatedNotParticipating", message: "2/3 members at revision rev-new; outdated: etcd-main-1; waiting for etcd-main-2"},
		{name: "deleting rule is the reason", strategy: appsv1.OnDeleteStatefulSetStrategyType, members: []member{healthy, outdated, healthy}, op: deleting,
			status: druidv1alpha1.ConditionFalse, reason: "ParticipatingFollower", message: "[participating/follower] (roles: direct)"},
		{name: "a done recorded before the new revision holds nothing", strategy: appsv1.OnDeleteStatefulSetStrategyType, members: []member{healthy, outdated, healthy}, op: staleDone,
			status: druidv1alpha1.ConditionFalse, reason: ReasonNotAllMembersUpdated, message: "outdated: etcd-main-1"},
		{name: "decision for another revision is ignored", strategy: appsv1.OnDeleteStatefulSetStrategyType, members: []member{healthy, outdated, rejoining}, op: olderRevision,
			status: druidv1alpha1.ConditionFalse, reason: ReasonNotAllMembersUpdated, message: "outdated: etcd-main-1"},
		{name: "RollingUpdate has no decision", strategy: appsv1.RollingUpdateStatefulSetStrategyType, members: []member{healthy, outdated, rejoining}, op: waiting,
			status: druidv1alpha1.ConditionFalse, reason: ReasonNotAllMembersUpdated, message: "2/3 members at revision rev-new; outdated: etcd-main-1"},
		{name: "StatefulSet not caught up", strategy: appsv1.OnDeleteStatefulSetStrategyType, members: []member{healthy, healthy, healthy}, lagging: true,
			status: druidv1alpha1.ConditionFalse, reason: ReasonNotAllMembersUpdated, message: "the StatefulSet controller has not observed the latest spec yet"},
		{name: "no StatefulSet", strategy: appsv1.OnDeleteStatefulSetStrategyType, members: []member{healthy}, noSts: true,
			status: druidv1alpha1.ConditionUnknown, reason: ReasonStatefulSetMissing, message: "the StatefulSet does not exist yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observed(tc.strategy, tc.members...)
			if tc.lagging {
				o.StatefulSet.Generation++
			}
			if tc.noSts {
				o.StatefulSet = nil
			}
			updateRevision := "rev-new"
			c := allMembersUpdatedCondition(o, updateRevision, tc.op)
			if c.Type != druidv1alpha1.ConditionTypeAllMembersUpdated || c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
				t.Fatalf("allMembersUpdatedCondition() = %s/%s %q; want %s/%s containing %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.message)
			}
			if tc.strategy == appsv1.RollingUpdateStatefulSetStrategyType && strings.Contains(c.Message, "waiting") {
				t.Errorf("an OnDelete decision leaked into a RollingUpdate message: %q", c.Message)
			}
		})
	}
}

func TestSetConditionsKeepsTimesOfUnchanged(t *testing.T) {
	earlier, later := metav1.NewTime(now), metav1.NewTime(now.Add(time.Minute))
	prev := []druidv1alpha1.Condition{
		{Type: "A", Status: druidv1alpha1.ConditionTrue, Reason: "R", Message: "m", LastTransitionTime: earlier, LastUpdateTime: earlier},
		{Type: "B", Status: druidv1alpha1.ConditionTrue, Reason: "R", Message: "m", LastTransitionTime: earlier, LastUpdateTime: earlier},
		{Type: "C", Status: druidv1alpha1.ConditionTrue, Reason: "R", Message: "m", LastTransitionTime: earlier, LastUpdateTime: earlier},
	}
	got := setConditions(prev, later,
		druidv1alpha1.Condition{Type: "A", Status: druidv1alpha1.ConditionTrue, Reason: "R", Message: "m"},
		druidv1alpha1.Condition{Type: "B", Status: druidv1alpha1.ConditionTrue, Reason: "R", Message: "other"},
		druidv1alpha1.Condition{Type: "C", Status: druidv1alpha1.ConditionFalse, Reason: "R", Message: "m"},
		druidv1alpha1.Condition{Type: "D", Status: druidv1alpha1.ConditionTrue})
	want := [][2]metav1.Time{{earlier, earlier}, {earlier, later}, {later, later}, {later, later}}
	for i, c := range got {
		if !c.LastTransitionTime.Equal(&want[i][0]) || !c.LastUpdateTime.Equal(&want[i][1]) {
			t.Errorf("%s: transition %s update %s, want %s and %s", c.Type, c.LastTransitionTime, c.LastUpdateTime, want[i][0], want[i][1])
		}
	}
}

func TestRolloutOperationRoundTrip(t *testing.T) {
	at := metav1.NewTime(now)
	for _, tc := range []struct {
		name        string
		d           rollout.Decision
		res         roles.Resolution
		needs       bool
		description string
		state       string
	}{
		{"wait", rollout.Decision{Action: rollout.ActionWait, Rule: rollout.RuleUpdatedNotParticipating, Reason: "waiting for etcd-main-2 (updated)"}, roles.Resolution{Source: roles.SourceNone}, false,
			"waiting for etcd-main-2 (updated) [wait/updated-not-participating]", OperationProcessing},
		{"delete with direct roles", rollout.Decision{Action: rollout.ActionDelete, Rule: rollout.RuleParticipatingFollower, Reason: "deleting etcd-main-0"}, roles.Resolution{Source: roles.SourceDirect}, true,
			"deleting etcd-main-0 [participating/follower] (roles: direct)", OperationProcessing},
		{"delete with lease roles", rollout.Decision{Action: rollout.ActionDelete, Rule: rollout.RuleParticipatingLeader, Reason: "deleting etcd-main-0"}, roles.Resolution{Source: roles.SourceLease, Detail: "members not asked: x [y]"}, true,
			"deleting etcd-main-0 [participating/leader] (roles: lease: members not asked: x [y])", OperationProcessing},
		{"done", rollout.Decision{Action: rollout.ActionDone, Rule: rollout.RuleDone, Reason: "all 3 pods run revision r"}, roles.Resolution{Source: roles.SourceNone}, false,
			"all 3 pods run revision r [done]", OperationSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := RolloutOperation(tc.d, tc.res, tc.needs, "rev-new", at)
			if op.Description != tc.description || op.State != tc.state || op.Type != OperationRollout || op.RunID != "rev-new" {
				t.Fatalf("RolloutOperation() = %+v, want description %q state %s", op, tc.description, tc.state)
			}
			if rule, ok := RolloutRule(&op, "rev-new"); !ok || rule != tc.d.Rule {
				t.Fatalf("RolloutRule() = %q, %v; want %q", rule, ok, tc.d.Rule)
			}
			if _, ok := RolloutRule(&op, "rev-other"); ok {
				t.Fatal("RolloutRule() accepted a decision for another revision")
			}
		})
	}
	for _, desc := range []string{"", "no rule here", "reason [", "reason []", "reason [Not A Rule]"} {
		if rule, ok := RolloutRule(&druidv1alpha1.LastOperation{Type: OperationRollout, RunID: "r", Description: desc}, "r"); ok {
			t.Errorf("RolloutRule(%q) = %q, want none", desc, rule)
		}
	}
}

func TestPatchRefusesFieldsOfOtherWriters(t *testing.T) {
	for _, tc := range []struct {
		w   Writer
		set func(*druidv1alpha1.EtcdStatus)
	}{
		{WriterEtcd, func(s *druidv1alpha1.EtcdStatus) { s.LastOperation = &druidv1alpha1.LastOperation{} }},
		{WriterOnDelete, func(s *druidv1alpha1.EtcdStatus) { s.Ready = ptr.To(true) }},
		{WriterStatus, func(s *druidv1alpha1.EtcdStatus) { s.ObservedGeneration = ptr.To[int64](3) }},
		{"unknown", func(*druidv1alpha1.EtcdStatus) {}},
	} {
		t.Run(string(tc.w), func(t *testing.T) {
			etcd := &druidv1alpha1.Etcd{}
			// No client: the write must be refused before it would be used.
			if err := Patch(t.Context(), nil, etcd, tc.w, tc.set); err == nil {
				t.Fatal("Patch() accepted a change to a field the writer does not own")
			}
			if etcd.Status.LastOperation != nil || etcd.Status.Ready != nil || etcd.Status.ObservedGeneration != nil {
				t.Errorf("refused change left on the object: %+v", etcd.Status)
			}
		})
	}
}

func TestSetConditionKeepsTimesAndOthers(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	scale := druidv1alpha1.ConditionTypeScaleOperationInProgress
	ready := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionTrue,
		Reason: ReasonQuorate, LastTransitionTime: t0, LastUpdateTime: t0}
	prev := []druidv1alpha1.Condition{ready,
		{Type: scale, Status: druidv1alpha1.ConditionFalse, Reason: "Done", Message: "m", LastTransitionTime: t0, LastUpdateTime: t0}}
	for _, tc := range []struct {
		name             string
		cond             druidv1alpha1.Condition
		wantTransitionAt metav1.Time
		wantUpdateAt     metav1.Time
	}{
		{"unchanged", druidv1alpha1.Condition{Type: scale, Status: druidv1alpha1.ConditionFalse, Reason: "Done", Message: "m"}, t0, t0},
		{"new message", druidv1alpha1.Condition{Type: scale, Status: druidv1alpha1.ConditionFalse, Reason: "Done", Message: "other"}, t0, t1},
		{"new status", druidv1alpha1.Condition{Type: scale, Status: druidv1alpha1.ConditionTrue, Reason: "AddLearner", Message: "m"}, t1, t1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cond.LastUpdateTime = t1
			got := SetCondition(prev, tc.cond)
			if len(got) != 2 || got[0] != ready || got[1].Type != scale {
				t.Fatalf("SetCondition() = %+v, want Ready untouched and %s replaced in place", got, scale)
			}
			if !got[1].LastTransitionTime.Equal(&tc.wantTransitionAt) || !got[1].LastUpdateTime.Equal(&tc.wantUpdateAt) {
				t.Errorf("times = %s / %s, want %s / %s", got[1].LastTransitionTime, got[1].LastUpdateTime, tc.wantTransitionAt, tc.wantUpdateAt)
			}
			if prev[1].Message != "m" || !prev[1].LastUpdateTime.Equal(&t0) {
				t.Error("SetCondition changed its input")
			}
		})
	}
	if got := SetCondition(nil, druidv1alpha1.Condition{Type: scale, Status: druidv1alpha1.ConditionTrue, LastUpdateTime: t1}); len(got) != 1 || !got[0].LastTransitionTime.Equal(&t1) {
		t.Errorf("SetCondition() on no conditions = %+v", got)
	}
}

func TestPatchRefusesConditionsOfOtherWriters(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{}
	etcd.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionTrue}}
	// No client: the write must be refused before it would be used.
	err := Patch(t.Context(), nil, etcd, WriterMembership, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = SetCondition(s.Conditions, druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionFalse})
	})
	if err == nil {
		t.Fatal("Patch() let the membership controller write the Ready condition")
	}
	if etcd.Status.Conditions[0].Status != druidv1alpha1.ConditionTrue {
		t.Errorf("refused change left on the object: %+v", etcd.Status.Conditions)
	}
}

func TestPatchSendsNothingWhenNothingChanged(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	etcd := &druidv1alpha1.Etcd{}
	etcd.Status.LastOperation = &druidv1alpha1.LastOperation{Type: OperationRollout, State: OperationSucceeded, LastUpdateTime: at}
	etcd.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeScaleOperationInProgress,
		Status: druidv1alpha1.ConditionFalse, Reason: "Done", LastTransitionTime: at, LastUpdateTime: at}}
	for _, tc := range []struct {
		w   Writer
		set func(*druidv1alpha1.EtcdStatus)
	}{
		{WriterOnDelete, func(s *druidv1alpha1.EtcdStatus) {
			s.LastOperation = &druidv1alpha1.LastOperation{Type: OperationRollout, State: OperationSucceeded, LastUpdateTime: at}
		}},
		{WriterEtcd, func(s *druidv1alpha1.EtcdStatus) { s.LastErrors = []druidv1alpha1.LastError{} }}, // empty, as nil
		{WriterMembership, func(s *druidv1alpha1.EtcdStatus) {
			s.Conditions = SetCondition(s.Conditions, druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeScaleOperationInProgress,
				Status: druidv1alpha1.ConditionFalse, Reason: "Done", LastUpdateTime: metav1.NewTime(at.Add(time.Hour))})
		}},
	} {
		t.Run(string(tc.w), func(t *testing.T) {
			// No client: a write would panic.
			if err := Patch(t.Context(), nil, etcd.DeepCopy(), tc.w, tc.set); err != nil {
				t.Fatalf("Patch() = %v", err)
			}
		})
	}
}
