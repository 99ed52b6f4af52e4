package status

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// Condition reasons.
const (
	ReasonQuorate              = "Quorate"
	ReasonNoMembers            = "NoMembers"
	ReasonAllMembersReady      = "AllMembersReady"
	ReasonNotAllMembersReady   = "NotAllMembersReady"
	ReasonAllMembersUpdated    = "AllMembersUpdated"
	ReasonNotAllMembersUpdated = "NotAllMembersUpdated"
	// ReasonUpdateStrategyHeld: the gate is off but OnDelete is kept until the step in flight
	// has finished (internal/decide/updatestrategy); the message says which pod it waits for.
	ReasonUpdateStrategyHeld = "UpdateStrategyHeld"
	ReasonStatefulSetMissing = "StatefulSetNotFound"
	ReasonInvalidReplicas    = "InvalidReplicas"
	ReasonTooManyMemberPods  = "TooManyMemberPods"
	ReasonTLS                = "TLS"
	ReasonPlaintextTraffic   = "PlaintextTraffic"
	ReasonMovingToTLS        = "MovingToTLS"
)

// DefaultUnknownGrace is how long a member stays Unknown (its Lease expired, its pod Ready)
// before it is taken as NotReady: etcd-druid's controllers.etcd.etcdMember.unknownThreshold
// default, which sets it.
const DefaultUnknownGrace = time.Minute

// Inputs is everything the status is computed from.
type Inputs struct {
	Etcd        *druidv1alpha1.Etcd
	StatefulSet *appsv1.StatefulSet // nil when not created yet
	Pods        []corev1.Pod
	// Leases are the member Leases the Etcd controls.
	Leases []coordinationv1.Lease
	// FullSnapshotLease and DeltaSnapshotLease are nil without backups (or before they exist).
	FullSnapshotLease  *coordinationv1.Lease
	DeltaSnapshotLease *coordinationv1.Lease
	Now                time.Time
	// UnknownGrace is how long a member may stay Unknown before it turns NotReady with reason
	// UnknownGracePeriodExceeded; DefaultUnknownGrace when not positive.
	UnknownGrace time.Duration
}

// Compute returns the Etcd status fields this controller owns, keeping lastTransitionTime of
// conditions and members whose status did not change. It is pure. Every condition is computed by
// one function in its own file, condition_<type>.go, from the observation alone;
// etcdstatus.StampConditions is the one place that merges them into the previous list.
func Compute(o Inputs) druidv1alpha1.EtcdStatus {
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
		if etcdstatus.PodReady(&pod) {
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
		// Quorum is counted over the voting members, not spec.replicas: during a scale-out the
		// membership controller grows the StatefulSet one learner at a time, so ordinals at or
		// above its replicas are not members yet, and a learner (its Lease says so) does not vote.
		votingLimit := -1
		if o.StatefulSet != nil && o.StatefulSet.Spec.Replicas != nil {
			votingLimit = int(*o.StatefulSet.Spec.Replicas)
		}
		voters, readyVoters := 0, 0
		for i, pod := range resources.PodNames(o.Etcd) {
			// A member is listed, and its Lease named, by its etcd member name (etcd-druid's
			// status.members[].name: <prefix>-<pod> with spec.memberNamePrefix).
			name := resources.MemberNameOf(o.Etcd, pod)
			old := findMember(prev.Members, name)
			m := unknownPastGrace(memberStatus(name, podsByName[pod], leasesByName[name], o.Now), old, o.Now, o.UnknownGrace)
			m = promotionPending(m, old, leaseRenewed(leasesByName[name], o.Now), o.Now)
			if old != nil && old.Status == m.Status && (old.Reason == etcdstatus.MemberReasonPromotionPending) == (m.Reason == etcdstatus.MemberReasonPromotionPending) {
				m.LastTransitionTime = old.LastTransitionTime
			} else {
				m.LastTransitionTime = now
			}
			out.Members = append(out.Members, m)
			if !countsAsVoter(o.Etcd, i, votingLimit, m) {
				continue
			}
			voters++
			if m.Status == druidv1alpha1.EtcdMemberStatusReady || m.Reason == etcdstatus.MemberReasonPromotionPending {
				readyVoters++
			}
		}
		out.ClusterSize = ptr.To(int32(voters))
		conds = []druidv1alpha1.Condition{
			readyCondition(int(o.Etcd.Spec.Replicas), voters, readyVoters),
			allMembersReadyCondition(out.Members),
			allMembersUpdatedCondition(o, updateRevision, prev.LastOperation),
		}
	}
	// Reported whatever the member count: data kept aside matters most when something is wrong.
	out.DataAside = dataAside(AsideReports(o.Etcd, o.Leases))
	conds = append(conds, backupConditions(o)...)
	running := runningTransport(o)
	conds = append(conds, tlsEnabledCondition(running))
	if c, ok := existingClusterCondition(o); ok {
		conds = append(conds, c)
	}
	out.PeerUrlTLSEnabled = ptr.To(running.Peer == transport.TLS)
	conds = etcdstatus.StampConditions(prev.Conditions, now, conds...)
	out.Conditions = conds
	out.Ready = ptr.To(conds[0].Status == druidv1alpha1.ConditionTrue && conds[1].Status == druidv1alpha1.ConditionTrue)
	return out
}

// countsAsVoter: member i votes. A learner (its Lease says so) never does, nor an ordinal at or
// above the StatefulSet's replicas. Once the voters are recorded (status.voters, from the
// leader's member list) a member votes only when it is one of them or its Lease says it leads or
// follows: a pod whose member is still joining, its init step running and its Lease empty, is no
// voter yet. Before the cluster formed nothing is recorded and every member of the StatefulSet
// counts, as all bootstrap together.
func countsAsVoter(etcd *druidv1alpha1.Etcd, i, votingLimit int, m druidv1alpha1.EtcdMemberStatus) bool {
	if (votingLimit >= 0 && i >= votingLimit) || (m.Role != nil && *m.Role == druidv1alpha1.EtcdRoleLearner) {
		return false
	}
	if len(etcd.Status.Voters) == 0 || m.Role != nil {
		return true
	}
	for _, v := range etcd.Status.Voters {
		if v.Name == m.Name {
			return true
		}
	}
	return false
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
			if memberlease.IsLearnerIdentity(*lease.Spec.HolderIdentity) {
				m.Role = ptr.To(druidv1alpha1.EtcdRoleLearner)
			}
		}
	}
	switch {
	case pod == nil:
		m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusNotReady, etcdstatus.MemberReasonPodMissing
	case !etcdstatus.PodReady(pod):
		m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusNotReady, etcdstatus.MemberReasonPodNotReady
	case leaseRenewed(lease, now):
		m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusReady, etcdstatus.MemberReasonLeaseSucceeded
	default:
		m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusUnknown, etcdstatus.MemberReasonLeaseExpired
	}
	return m
}

// unknownPastGrace is DEP-01's scenario 7: a member Unknown (its Lease expired) for longer than
// grace, as the previous status's lastTransitionTime says, turns NotReady with reason
// UnknownGracePeriodExceeded, and stays so while its Lease stays expired; its lastTransitionTime
// then marks when it turned NotReady, from which notReadyThreshold counts (internal/decide/memberhealth).
// A member turns Unknown as soon as its Lease expires: only this further step waits.
func unknownPastGrace(m druidv1alpha1.EtcdMemberStatus, old *druidv1alpha1.EtcdMemberStatus, now time.Time, grace time.Duration) druidv1alpha1.EtcdMemberStatus {
	if m.Status != druidv1alpha1.EtcdMemberStatusUnknown || old == nil {
		return m
	}
	if grace <= 0 {
		grace = DefaultUnknownGrace
	}
	switch {
	case old.Status == druidv1alpha1.EtcdMemberStatusNotReady && old.Reason == etcdstatus.MemberReasonUnknownGracePeriodExceeded,
		old.Status == druidv1alpha1.EtcdMemberStatusUnknown && now.Sub(old.LastTransitionTime.Time) > grace:
		m.Status, m.Reason = druidv1alpha1.EtcdMemberStatusNotReady, etcdstatus.MemberReasonUnknownGracePeriodExceeded
	}
	return m
}

// promotionGrace bounds how long a just-promoted member counts towards the quorum before its pod
// is Ready: its readiness probe runs every 2 s (resources.StatefulSet), and the kubelet then
// reports the result.
const promotionGrace = 10 * time.Second

// promotionPending: a member whose Lease said learner at the last look and now says it votes was
// just promoted, and its pod is not Ready only because the readiness probe (a linearizable read,
// which etcd refuses a learner) has not run since. etcd promotes only a learner that has caught
// up with the leader, so the member takes part in the quorum already: for up to promotionGrace
// its reason says so and the Ready condition counts it, rather than report a quorum loss that
// is not there. Its status stays NotReady, and a pod still not Ready after the grace is an
// ordinary NotReady member. Its Lease must be renewed: its agent heard it answer.
func promotionPending(m druidv1alpha1.EtcdMemberStatus, old *druidv1alpha1.EtcdMemberStatus, renewed bool, now time.Time) druidv1alpha1.EtcdMemberStatus {
	if old == nil || !renewed || m.Status != druidv1alpha1.EtcdMemberStatusNotReady || m.Reason != etcdstatus.MemberReasonPodNotReady ||
		m.Role == nil || *m.Role == druidv1alpha1.EtcdRoleLearner {
		return m
	}
	wasLearner := old.Role != nil && *old.Role == druidv1alpha1.EtcdRoleLearner
	pendingSince := old.Reason == etcdstatus.MemberReasonPromotionPending && now.Sub(old.LastTransitionTime.Time) < promotionGrace
	if wasLearner || pendingSince {
		m.Reason = etcdstatus.MemberReasonPromotionPending
	}
	return m
}

func leaseRenewed(lease *coordinationv1.Lease, now time.Time) bool {
	if lease == nil {
		return false
	}
	expiry, renewed := roles.LeaseExpiry(lease)
	return renewed && now.Before(expiry)
}

func findMember(members []druidv1alpha1.EtcdMemberStatus, name string) *druidv1alpha1.EtcdMemberStatus {
	for i := range members {
		if members[i].Name == name {
			return &members[i]
		}
	}
	return nil
}
