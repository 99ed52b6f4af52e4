package memberlease

import (
	"strconv"
	"strings"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// Roles written into a member Lease's holderIdentity are etcd-druid's member roles, so druid's
// tools read our Leases: "Member" is a voting follower, "Learner" a member that does not vote
// yet (being added by a scale-out or a replacement).
const (
	RoleLeader  = string(druidv1alpha1.EtcdRoleLeader)
	RoleMember  = string(druidv1alpha1.EtcdRoleMember)
	RoleLearner = string(druidv1alpha1.EtcdRoleLearner)
)

// Holder is what a member Lease's holderIdentity says.
type Holder struct {
	// MemberID is the etcd member ID in canonical lower-case hex, without 0x.
	MemberID string
	// ClusterID is the cluster ID as written (hex); empty in the older two-part form.
	ClusterID string
	// Role is RoleLeader, RoleMember or RoleLearner.
	Role string
}

// HolderIdentity is the holderIdentity the sidecar writes for a voting member:
// "<memberID>:<clusterID>:<role>", IDs in lower-case hex without 0x, as etcdctl prints them.
func HolderIdentity(memberID, clusterID uint64, leader bool) string {
	role := RoleMember
	if leader {
		role = RoleLeader
	}
	return formatHolder(memberID, clusterID, role)
}

// LearnerHolderIdentity is the holderIdentity of a learner: "<memberID>:<clusterID>:Learner".
func LearnerHolderIdentity(memberID, clusterID uint64) string {
	return formatHolder(memberID, clusterID, RoleLearner)
}

func formatHolder(memberID, clusterID uint64, role string) string {
	return strings.Join([]string{strconv.FormatUint(memberID, 16), strconv.FormatUint(clusterID, 16), role}, ":")
}

// IsLearnerIdentity reports whether a holderIdentity names a learner.
func IsLearnerIdentity(holder string) bool { return strings.HasSuffix(holder, ":"+RoleLearner) }

// ParseHolderIdentity reads a member Lease's holderIdentity: "<memberID>:<clusterID>:<role>", or
// "<memberID>:<role>" as sidecars wrote it before the cluster ID was added (a Lease of such a pod
// may still be read during an upgrade). Role names are case-sensitive, as druid spells them; a
// zero or non-hex member ID is refused, since etcd never assigns 0.
func ParseHolderIdentity(s string) (Holder, bool) {
	parts := strings.Split(s, ":")
	var h Holder
	switch len(parts) {
	case 2:
		h.MemberID, h.Role = parts[0], parts[1]
	case 3:
		h.MemberID, h.ClusterID, h.Role = parts[0], parts[1], parts[2]
		if h.ClusterID == "" {
			return Holder{}, false
		}
	default:
		return Holder{}, false
	}
	id, err := strconv.ParseUint(h.MemberID, 16, 64)
	if err != nil || id == 0 {
		return Holder{}, false
	}
	switch h.Role {
	case RoleLeader, RoleMember, RoleLearner:
	default:
		return Holder{}, false
	}
	h.MemberID = strconv.FormatUint(id, 16)
	return h, true
}
