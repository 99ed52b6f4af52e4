package roles

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
)

// Source says where the roles came from.
type Source string

const (
	SourceDirect Source = "direct"
	SourceLease  Source = "lease"
	SourceNone   Source = "none"
)

// SourcePolicy selects which sources Resolve may use: the operator configuration's memberRoleSource.
type SourcePolicy string

const (
	// SourcePolicyAuto asks the members first and falls back to Leases.
	SourcePolicyAuto SourcePolicy = "Auto"
	// SourcePolicyLeaseOnly uses only the member Leases, as DEP-07 describes.
	SourcePolicyLeaseOnly SourcePolicy = "LeaseOnly"
)

// ParseSourcePolicy accepts the two policy names, the values of memberRoleSource.
func ParseSourcePolicy(s string) (SourcePolicy, error) {
	switch SourcePolicy(s) {
	case SourcePolicyAuto, SourcePolicyLeaseOnly:
		return SourcePolicy(s), nil
	default:
		return "", fmt.Errorf("unknown role source %q, want %s or %s", s, SourcePolicyAuto, SourcePolicyLeaseOnly)
	}
}

// MemberReport is one member's view of itself. IDs are hex; Name is the member name, which is
// also the pod name. ID is known from the member list even when the member is unreachable.
type MemberReport struct {
	Name      string `json:"name"`
	ID        string `json:"id"`
	LeaderID  string `json:"leaderID"`
	Reachable bool   `json:"reachable"`
	// AppliedIndex is the member's raft applied index (0: unknown, as in reports recorded
	// before it was kept); IsLearner marks a non-voting member.
	AppliedIndex uint64 `json:"appliedIndex,omitempty"`
	IsLearner    bool   `json:"isLearner,omitempty"`
}

// Resolution is the outcome of Resolve.
type Resolution struct {
	// Roles has an entry for every pod name passed to Resolve.
	Roles     map[string]rollout.Role
	Source    Source
	LeaderPod string
	// Mismatch is set when the members and a fresh Lease disagree about a role.
	Mismatch bool
	// Detail explains, for humans, why this source was used and what disagreed.
	Detail string
}

// ParseHolderIdentity reads a member Lease's holderIdentity (memberlease's format) as the
// planner's role: a learner never leads and, not ready, never participates, so the rollout
// ranks it as a follower.
func ParseHolderIdentity(s string) (memberID, clusterID string, role rollout.Role, ok bool) {
	h, ok := memberlease.ParseHolderIdentity(s)
	if !ok {
		return "", "", "", false
	}
	role = rollout.RoleFollower
	if h.Role == memberlease.RoleLeader {
		role = rollout.RoleLeader
	}
	return h.MemberID, h.ClusterID, role, true
}

// Resolve assigns a role to every pod name; see the package documentation for the rules.
// Leases whose name is not one of podNames belong to something else (another etcd in the same
// namespace, a controller's leader election) and are ignored.
func Resolve(podNames []string, members []MemberReport, leases []coordinationv1.Lease, mode SourcePolicy, now time.Time) Resolution {
	fromLeases := readLeases(podNames, leases, now)
	var why string
	if mode == SourcePolicyLeaseOnly {
		why = "role source is LeaseOnly"
	} else {
		fromMembers, ok := membersView(members)
		if ok {
			return crossCheck(podNames, fromMembers, fromLeases, members)
		}
		why = fromMembers.why
	}
	return leaseResolution(podNames, fromLeases, why)
}

// leaseRole is what one usable Lease says.
type leaseRole struct {
	memberID string
	role     rollout.Role
}

type leaseView struct {
	roles map[string]leaseRole // fresh, well-formed leases by pod name
	notes []string             // leases that could not be used, and why
}

func readLeases(podNames []string, leases []coordinationv1.Lease, now time.Time) leaseView {
	v := leaseView{roles: map[string]leaseRole{}}
	ours := map[string]bool{}
	for _, name := range podNames {
		ours[name] = true
	}
	for _, l := range leases {
		if !ours[l.Name] {
			continue
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			v.notes = append(v.notes, fmt.Sprintf("lease %s has no holder", l.Name))
			continue
		}
		id, _, role, ok := ParseHolderIdentity(*l.Spec.HolderIdentity)
		if !ok {
			v.notes = append(v.notes, fmt.Sprintf("lease %s has malformed holder %q", l.Name, *l.Spec.HolderIdentity))
			continue
		}
		expiry, renewed := LeaseExpiry(&l)
		if !renewed {
			v.notes = append(v.notes, fmt.Sprintf("lease %s was never renewed", l.Name))
			continue
		}
		if expiry.Before(now) {
			v.notes = append(v.notes, fmt.Sprintf("lease %s (%s) expired %s ago", l.Name, *l.Spec.HolderIdentity, now.Sub(expiry).Round(time.Second)))
			continue
		}
		v.roles[l.Name] = leaseRole{memberID: id, role: role}
	}
	return v
}

// LeaseExpiry is when a member Lease stops vouching for its holder: its last renewal plus its
// duration. renewed is false for a Lease its agent never renewed.
func LeaseExpiry(l *coordinationv1.Lease) (expiry time.Time, renewed bool) {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}, false
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second), true
}

type membersResult struct {
	leaderID  string
	leaderPod string
	agree     int
	reachable int
	why       string // set when there is no majority
}

// membersView finds the leader a strict majority of the reachable members follow.
func membersView(members []MemberReport) (membersResult, bool) {
	var r membersResult
	if len(members) == 0 {
		r.why = "no member status"
		return r, false
	}
	votes := map[string]int{}
	for _, m := range members {
		if !m.Reachable {
			continue
		}
		r.reachable++
		if id := canonicalID(m.LeaderID); id != "" {
			votes[id]++
		}
	}
	if r.reachable == 0 {
		r.why = fmt.Sprintf("none of %d members reachable", len(members))
		return r, false
	}
	for id, n := range votes {
		if 2*n > r.reachable {
			r.leaderID, r.agree = id, n
		}
	}
	if r.leaderID == "" {
		r.why = fmt.Sprintf("no leader reported by a majority of %d reachable members (%s)", r.reachable, describeVotes(votes))
		return r, false
	}
	for _, m := range members {
		if canonicalID(m.ID) == r.leaderID {
			r.leaderPod = m.Name
		}
	}
	return r, true
}

func describeVotes(votes map[string]int) string {
	if len(votes) == 0 {
		return "none reports a leader"
	}
	ids := make([]string, 0, len(votes))
	for id := range votes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s: %d", id, votes[id])
	}
	return "votes " + strings.Join(parts, ", ")
}

// crossCheck builds the member-based roles and compares them with the fresh Leases.
func crossCheck(podNames []string, m membersResult, leases leaseView, members []MemberReport) Resolution {
	idOf := map[string]string{}
	for _, r := range members {
		if id := canonicalID(r.ID); id != "" {
			idOf[r.Name] = id
		}
	}
	res := Resolution{Roles: map[string]rollout.Role{}, Source: SourceDirect, LeaderPod: m.leaderPod}
	for _, name := range podNames {
		switch {
		case m.leaderPod != "" && name == m.leaderPod:
			res.Roles[name] = rollout.RoleLeader
		case m.leaderPod != "":
			res.Roles[name] = rollout.RoleFollower
		case idOf[name] != "":
			// The leader's ID matches no reported member, but this member's ID is known and
			// is not the leader's.
			res.Roles[name] = rollout.RoleFollower
		default:
			res.Roles[name] = rollout.RoleUnknown
		}
	}

	leaderDesc := fmt.Sprintf("member %s", m.leaderID)
	if m.leaderPod != "" {
		leaderDesc = m.leaderPod
	}
	detail := []string{fmt.Sprintf("members: %s is leader (%d/%d reachable agree)", leaderDesc, m.agree, m.reachable)}

	var disagreements []string
	checked := 0
	for _, name := range sortedKeys(leases.roles) {
		l := leases.roles[name]
		if id, known := idOf[name]; known && id != l.memberID {
			detail = append(detail, fmt.Sprintf("lease %s names member %s but the member's id is %s", name, l.memberID, id))
			continue
		}
		memberRole := rollout.RoleFollower
		if name == m.leaderPod || (m.leaderPod == "" && l.memberID == m.leaderID) {
			memberRole = rollout.RoleLeader
		}
		checked++
		if l.role != memberRole {
			disagreements = append(disagreements, fmt.Sprintf("lease %s says %s", name, holderRoleName(l.role)))
		}
	}
	switch {
	case len(disagreements) > 0:
		res.Mismatch = true
		detail = append(detail, "leases disagree: "+strings.Join(disagreements, ", ")+"; trusting the members")
	case checked > 0:
		detail = append(detail, fmt.Sprintf("%s agree", leaseCount(checked)))
	default:
		detail = append(detail, "no fresh lease to cross-check")
	}
	res.Detail = strings.Join(append(detail, leases.notes...), "; ")
	return res
}

// leaseResolution takes the roles from the fresh Leases alone.
func leaseResolution(podNames []string, leases leaseView, why string) Resolution {
	res := Resolution{Roles: map[string]rollout.Role{}, Source: SourceLease}
	var claimants []string
	used := 0
	for _, name := range podNames {
		l, ok := leases.roles[name]
		if !ok {
			res.Roles[name] = rollout.RoleUnknown
			continue
		}
		used++
		res.Roles[name] = l.role
		if l.role == rollout.RoleLeader {
			claimants = append(claimants, name)
		}
	}
	detail := []string{why}
	switch {
	case used == 0:
		res.Source = SourceNone
		detail = append(detail, "no fresh lease for any pod; roles unknown")
	case len(claimants) > 1:
		// Two fresh leader claims straddle a leadership change; neither can be trusted.
		for _, name := range claimants {
			res.Roles[name] = rollout.RoleUnknown
		}
		detail = append(detail, fmt.Sprintf("roles from %s, but %s all claim Leader", leaseCount(used), strings.Join(claimants, ", ")))
	default:
		if len(claimants) == 1 {
			res.LeaderPod = claimants[0]
		}
		detail = append(detail, fmt.Sprintf("roles from %s", leaseCount(used)))
	}
	res.Detail = strings.Join(append(detail, leases.notes...), "; ")
	return res
}

// canonicalID normalises a hex member ID; "" and "0" mean no member (etcd reports leader 0
// while there is none).
func canonicalID(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), 16, 64)
	if err != nil {
		return strings.ToLower(s)
	}
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 16)
}

// holderRoleName spells a role as a holderIdentity does, for messages quoting a Lease.
func holderRoleName(r rollout.Role) string {
	if r == rollout.RoleLeader {
		return memberlease.RoleLeader
	}
	return memberlease.RoleMember
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func leaseCount(n int) string {
	if n == 1 {
		return "1 fresh lease"
	}
	return fmt.Sprintf("%d fresh leases", n)
}
