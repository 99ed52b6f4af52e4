package status

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
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
		{3, 3, 1, druidv1alpha1.ConditionFalse, etcdstatus.ReasonQuorumLost, "1/3 members ready, quorum needs 2"},
		{5, 5, 2, druidv1alpha1.ConditionFalse, etcdstatus.ReasonQuorumLost, "2/5 members ready, quorum needs 3"},
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
	expired := druidv1alpha1.EtcdMemberStatus{Name: "etcd-main-1", Status: druidv1alpha1.EtcdMemberStatusUnknown, Reason: etcdstatus.MemberReasonLeaseExpired}
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
	waiting := &druidv1alpha1.LastOperation{Type: etcdstatus.OperationRollout, RunID: "rev-new",
		Description: "waiting for etcd-main-2 (updated) to rejoin the quorum [rollout/wait/updated-not-participating]"}
	deleting := &druidv1alpha1.LastOperation{Type: etcdstatus.OperationRollout, RunID: "rev-new",
		Description: "deleting etcd-main-1 (follower, outdated): every updated pod participates; 3/3 participating, 1 outdated [rollout/participating/follower] (roles: direct)"}
	staleDone := &druidv1alpha1.LastOperation{Type: etcdstatus.OperationRollout, RunID: "rev-new", Description: "all 3 pods run revision rev-new [rollout/done]"}
	olderRevision := &druidv1alpha1.LastOperation{Type: etcdstatus.OperationRollout, RunID: "rev-old", Description: waiting.Description}
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
			status: druidv1alpha1.ConditionFalse, reason: "RolloutWaitUpdatedNotParticipating", message: "2/3 members at revision rev-new; outdated: etcd-main-1; waiting for etcd-main-2"},
		{name: "deleting rule is the reason", strategy: appsv1.OnDeleteStatefulSetStrategyType, members: []member{healthy, outdated, healthy}, op: deleting,
			status: druidv1alpha1.ConditionFalse, reason: "RolloutParticipatingFollower", message: "[rollout/participating/follower] (roles: direct)"},
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
