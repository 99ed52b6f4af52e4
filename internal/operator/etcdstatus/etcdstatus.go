package etcdstatus

import (
	corev1 "k8s.io/api/core/v1"
)

// ReasonQuorumLost is the Ready condition's reason while fewer than a quorum of the voters are
// ready. The status controller sets it; the recovery controller looks at a cluster closely only
// while it is set.
const ReasonQuorumLost = "QuorumLost"

// Reasons of status.members[].reason, written by the status controller and read by the
// membership controller's scenario 9 (a reason about the pod is superseded by the pod itself).
const (
	MemberReasonLeaseSucceeded = "LeaseSucceeded"
	MemberReasonLeaseExpired   = "LeaseExpired"
	MemberReasonPodNotReady    = "ContainerNotReady"
	MemberReasonPodMissing     = "PodNotFound"
	// MemberReasonPromotionPending: a member promoted from learner moments ago, its pod's
	// readiness not yet probed since (the status controller's promotionPending).
	MemberReasonPromotionPending = "PromotedReadinessPending"
	// MemberReasonUnknownGracePeriodExceeded: the member's Lease has been expired (status
	// Unknown) longer than the unknown grace (controllers.etcd.etcdMember.unknownThreshold), so it is taken as NotReady (DEP-01 scenario 7).
	MemberReasonUnknownGracePeriodExceeded = "UnknownGracePeriodExceeded"
)

// PodReady is the pod's Ready condition: for a member, quorum participation (its readiness
// probe). status.members, readyReplicas and the Ready condition count it, and so does the Etcd
// reconciler when it waits for a rollout step to finish, so both see the same member as ready.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
