package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/memberagent"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/rollout"
)

// Condition reasons.
const (
	ReasonQuorate              = "Quorate"
	ReasonQuorumLost           = "QuorumLost"
	ReasonNoMembers            = "NoMembers"
	ReasonAllMembersReady      = "AllMembersReady"
	ReasonNotAllMembersReady   = "NotAllMembersReady"
	ReasonAllMembersUpdated    = "AllMembersUpdated"
	ReasonNotAllMembersUpdated = "NotAllMembersUpdated"
	ReasonStatefulSetMissing   = "StatefulSetNotFound"
	ReasonInvalidReplicas      = "InvalidReplicas"
	ReasonTooManyMemberPods    = "TooManyMemberPods"

	MemberReasonLeaseSucceeded = "LeaseSucceeded"
	MemberReasonLeaseExpired   = "LeaseExpired"
	MemberReasonPodNotReady    = "ContainerNotReady"
	MemberReasonPodMissing     = "PodNotFound"

	// OperationRollout is the lastOperation type the ondelete controller writes.
	OperationRollout = "Rollout"
)

// Observed is everything the status is computed from.
type Observed struct {
	Etcd        *druidv1alpha1.Etcd
	StatefulSet *appsv1.StatefulSet // nil when not created yet
	Pods        []corev1.Pod
	Leases      []coordinationv1.Lease
	Now         time.Time
}

// Compute returns the Etcd status fields this controller owns, keeping lastTransitionTime of
// conditions and members whose status did not change. It is pure.
func Compute(o Observed) druidv1alpha1.EtcdStatus {
	prev := o.Etcd.Status
	now := metav1.NewTime(o.Now)
	out := druidv1alpha1.EtcdStatus{
		Selector: ptr.To(labels.SelectorFromSet(resources.SelectorLabels(o.Etcd)).String()),
	}

	podsByName := map[string]*corev1.Pod{}
	for i := range o.Pods {
		podsByName[o.Pods[i].Name] = &o.Pods[i]
	}
	leasesByName := map[string]*coordinationv1.Lease{}
	for i := range o.Leases {
		leasesByName[o.Leases[i].Name] = &o.Leases[i]
	}

	updateRevision := ""
	if o.StatefulSet != nil {
		updateRevision = o.StatefulSet.Status.UpdateRevision
	}
	for _, pod := range o.Pods {
		if !pod.DeletionTimestamp.IsZero() {
			continue
		}
		out.Replicas++
		if podReady(&pod) {
			out.ReadyReplicas++
		}
		// Computed from the pods, not the StatefulSet's currentReplicas, which does not advance
		// under OnDelete before Kubernetes 1.37.
		if updateRevision != "" && pod.Labels[appsv1.StatefulSetRevisionLabel] == updateRevision {
			out.CurrentReplicas++
		}
	}

	var conds []druidv1alpha1.Condition
	if problem := resources.ValidateReplicas(o.Etcd.Spec.Replicas); problem != nil {
		// Member names come from spec.replicas: a count the operator refuses to act on lists no
		// members and sizes nothing, it only says why.
		conds = outOfBoundsConditions(ReasonInvalidReplicas, problem.Message)
	} else if len(o.Pods) > druidv1alpha1.MaxReplicas {
		// More pods carry the member labels than any cluster has members: something else
		// selects like us, and no count or role derived from them can be trusted.
		conds = outOfBoundsConditions(ReasonTooManyMemberPods, fmt.Sprintf(
			"%d pods carry the member labels; an Etcd has at most %d members", len(o.Pods), druidv1alpha1.MaxReplicas))
	} else {
		readyMembers := 0
		for _, name := range resources.MemberNames(o.Etcd) {
			m := memberStatus(name, podsByName[name], leasesByName[name], o.Now)
			if old := findMember(prev.Members, name); old != nil && old.Status == m.Status {
				m.LastTransitionTime = old.LastTransitionTime
			} else {
				m.LastTransitionTime = now
			}
			if m.Status == druidv1alpha1.EtcdMemberStatusReady {
				readyMembers++
			}
			out.Members = append(out.Members, m)
		}
		conds = []druidv1alpha1.Condition{
			readyCondition(int(o.Etcd.Spec.Replicas), readyMembers),
			allMembersReadyCondition(out.Members),
			allMembersUpdatedCondition(o, updateRevision, prev.LastOperation),
		}
	}
	for i := range conds {
		conds[i].LastUpdateTime = now
		conds[i].LastTransitionTime = now
		old := findCondition(prev.Conditions, conds[i].Type)
		if old == nil || old.Status != conds[i].Status {
			continue
		}
		conds[i].LastTransitionTime = old.LastTransitionTime
		// An unchanged condition keeps its update time too, so recomputing writes nothing and
		// does not wake the controllers that watch the Etcd.
		if old.Reason == conds[i].Reason && old.Message == conds[i].Message {
			conds[i].LastUpdateTime = old.LastUpdateTime
		}
	}
	out.Conditions = conds
	out.Ready = ptr.To(conds[0].Status == druidv1alpha1.ConditionTrue && conds[1].Status == druidv1alpha1.ConditionTrue)
	return out
}

func memberStatus(name string, pod *corev1.Pod, lease *coordinationv1.Lease, now time.Time) druidv1alpha1.EtcdMemberStatus {
	m := druidv1alpha1.EtcdMemberStatus{Name: name}
	if lease != nil && lease.Spec.HolderIdentity != nil {
		if id, _, role, ok := roles.ParseHolderIdentity(*lease.Spec.HolderIdentity); ok {
			m.ID = ptr.To(id)
			switch role {
			case rollout.RoleLeader:
				m.Role = ptr.To(druidv1alpha1.EtcdRoleLeader)
			case rollout.RoleFollower:
				m.Role = ptr.To(druidv1alpha1.EtcdRoleMember)
			}
			if memberagent.IsLearnerIdentity(*lease.Spec.HolderIdentity) {
				m.Role = ptr.To(druidv1alpha1.EtcdRoleLearner)
			}
		}
	}
	switch {
	case pod == nil:
		m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusNotReady, MemberReasonPodMissing
	case !podReady(pod):
		m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusNotReady, MemberReasonPodNotReady
	case leaseRenewed(lease, now):
		m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusReady, MemberReasonLeaseSucceeded
	default:
		m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusUnknown, MemberReasonLeaseExpired
	}
	return m
}

func leaseRenewed(lease *coordinationv1.Lease, now time.Time) bool {
	if lease == nil || lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return false
	}
	expiry := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	return now.Before(expiry)
}

func readyCondition(replicas, readyMembers int) druidv1alpha1.Condition {
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeReady}
	quorum := replicas/2 + 1
	switch {
	case replicas == 0:
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionFalse, ReasonNoMembers, "spec.replicas is 0"
	case readyMembers >= quorum:
		c.Status, c.Reason = druidv1alpha1.ConditionTrue, ReasonQuorate
		c.Message = fmt.Sprintf("%d/%d members ready, quorum is %d", readyMembers, replicas, quorum)
	default:
		c.Status, c.Reason = druidv1alpha1.ConditionFalse, ReasonQuorumLost
		c.Message = fmt.Sprintf("%d/%d members ready, quorum needs %d", readyMembers, replicas, quorum)
	}
	return c
}

// outOfBoundsConditions are the conditions of an Etcd whose spec.replicas or member pods exceed
// MaxReplicas, in the order Compute expects (Ready first, AllMembersReady second).
func outOfBoundsConditions(reason, message string) []druidv1alpha1.Condition {
	return []druidv1alpha1.Condition{
		{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionFalse, Reason: reason, Message: message},
		{Type: druidv1alpha1.ConditionTypeAllMembersReady, Status: druidv1alpha1.ConditionUnknown, Reason: reason, Message: message},
		{Type: druidv1alpha1.ConditionTypeAllMembersUpdated, Status: druidv1alpha1.ConditionUnknown, Reason: reason, Message: message},
	}
}

func allMembersReadyCondition(members []druidv1alpha1.EtcdMemberStatus) druidv1alpha1.Condition {
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeAllMembersReady}
	var notReady []string
	for _, m := range members {
		if m.Status != druidv1alpha1.EtcdMemberStatusReady {
			notReady = append(notReady, fmt.Sprintf("%s (%s)", m.Name, m.Reason))
		}
	}
	if len(notReady) == 0 && len(members) > 0 {
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionTrue, ReasonAllMembersReady, "all members are ready"
		return c
	}
	c.Status, c.Reason = druidv1alpha1.ConditionFalse, ReasonNotAllMembersReady
	c.Message = "not ready: " + strings.Join(notReady, ", ")
	if len(members) == 0 {
		c.Message = "no members"
	}
	return c
}

// allMembersUpdatedCondition compares each member pod's controller-revision-hash with the
// StatefulSet's update revision. While a rollout is under way under OnDelete, the message carries
// the ondelete controller's current decision (from status.lastOperation).
func allMembersUpdatedCondition(o Observed, updateRevision string, op *druidv1alpha1.LastOperation) druidv1alpha1.Condition {
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeAllMembersUpdated}
	if o.StatefulSet == nil {
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionUnknown, ReasonStatefulSetMissing, "the StatefulSet does not exist yet"
		return c
	}
	sts := o.StatefulSet
	var outdated []string
	updated := 0
	names := resources.MemberNames(o.Etcd)
	for _, name := range names {
		pod := findPod(o.Pods, name)
		if pod == nil || updateRevision == "" || pod.Labels[appsv1.StatefulSetRevisionLabel] != updateRevision || !pod.DeletionTimestamp.IsZero() {
			outdated = append(outdated, name)
			continue
		}
		updated++
	}
	sort.Strings(outdated)
	stsCaughtUp := sts.Status.ObservedGeneration >= sts.Generation
	if len(outdated) == 0 && stsCaughtUp {
		c.Status, c.Reason = druidv1alpha1.ConditionTrue, ReasonAllMembersUpdated
		c.Message = fmt.Sprintf("all %d members run revision %s", len(names), updateRevision)
		return c
	}
	c.Status, c.Reason = druidv1alpha1.ConditionFalse, ReasonNotAllMembersUpdated
	c.Message = fmt.Sprintf("%d/%d members at revision %s; outdated: %s", updated, len(names), updateRevision, strings.Join(outdated, ", "))
	if !stsCaughtUp {
		c.Message = "the StatefulSet controller has not observed the latest spec yet"
	}
	if sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType && op != nil &&
		op.Type == OperationRollout && op.RunID == updateRevision && op.Description != "" {
		c.Message += "; " + op.Description
	}
	return c
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func findPod(pods []corev1.Pod, name string) *corev1.Pod {
	for i := range pods {
		if pods[i].Name == name {
			return &pods[i]
		}
	}
	return nil
}

func findMember(members []druidv1alpha1.EtcdMemberStatus, name string) *druidv1alpha1.EtcdMemberStatus {
	for i := range members {
		if members[i].Name == name {
			return &members[i]
		}
	}
	return nil
}

func findCondition(conds []druidv1alpha1.Condition, t druidv1alpha1.ConditionType) *druidv1alpha1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
