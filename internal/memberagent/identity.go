package memberagent

import (
	"strconv"
	"strings"
)

// Roles written into holderIdentity. "Member" covers followers and learners.
const (
	RoleLeader = "Leader"
	RoleMember = "Member"
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
