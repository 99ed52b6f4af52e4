package memberagent

import (
	"strconv"
	"strings"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// Roles written into holderIdentity are etcd-druid's member roles: "Member" is a voting follower,
// "Learner" a member that does not vote yet (being added by a scale-out or a replacement).
const (
	RoleLeader  = string(druidv1alpha1.EtcdRoleLeader)
	RoleMember  = string(druidv1alpha1.EtcdRoleMember)
	RoleLearner = string(druidv1alpha1.EtcdRoleLearner)
)

// HolderIdentity is the Lease holderIdentity for a member: "<memberID>:<clusterID>:<role>", IDs
// in lower-case hex without 0x, as etcdctl prints them.
func HolderIdentity(memberID, clusterID uint64, leader bool) string {
	role := RoleMember
	if leader {
		role = RoleLeader
	}
	return strings.Join([]string{strconv.FormatUint(memberID, 16), strconv.FormatUint(clusterID, 16), role}, ":")
}

// LearnerHolderIdentity is the holderIdentity of a learner: "<memberID>:<clusterID>:Learner".
func LearnerHolderIdentity(memberID, clusterID uint64) string {
	return strings.Join([]string{strconv.FormatUint(memberID, 16), strconv.FormatUint(clusterID, 16), RoleLearner}, ":")
}

// IsLearnerIdentity reports whether a holderIdentity names a learner.
func IsLearnerIdentity(holder string) bool { return strings.HasSuffix(holder, ":"+RoleLearner) }
