package roles

import (
	"maps"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
)

const (
	id0 = "8e9e05c52164694d"
	id1 = "91bc3c398fb3c146"
	id2 = "fd422379fda50e48"
)

var (
	now  = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	pods = []string{"etcd-main-0", "etcd-main-1", "etcd-main-2"}
)

func member(name, id, leader string) MemberReport {
	return MemberReport{Name: name, ID: id, LeaderID: leader, Reachable: true}
}

func unreachable(name, id string) MemberReport { return MemberReport{Name: name, ID: id} }

func allFollow(leader string) []MemberReport {
	return []MemberReport{member("etcd-main-0", id0, leader), member("etcd-main-1", id1, leader), member("etcd-main-2", id2, leader)}
}

// lease builds a member Lease renewed `age` before now.
func lease(name, holder string, age time.Duration) coordinationv1.Lease {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
	l.Spec.LeaseDurationSeconds = ptr.To[int32](15)
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
		l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-age)}
	}
	return l
}

func freshLeases(leader string) []coordinationv1.Lease {
	var out []coordinationv1.Lease
	for i, id := range []string{id0, id1, id2} {
		role := "Member"
		if id == leader {
			role = "Leader"
		}
		out = append(out, lease(pods[i], id+":"+role, 3*time.Second))
	}
	return out
}

func roleMap(leader int, others rollout.Role) map[string]rollout.Role {
	m := map[string]rollout.Role{}
	for i, p := range pods {
		m[p] = others
		if i == leader {
			m[p] = rollout.RoleLeader
		}
	}
	return m
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name       string
		members    []MemberReport
		leases     []coordinationv1.Lease
		mode       SourcePolicy
		wantRoles  map[string]rollout.Role
		wantSource Source
		wantLeader string
		mismatch   bool
		detail     string // substring
	}{
		{name: "members and leases agree",
			members: allFollow(id1), leases: freshLeases(id1), mode: SourcePolicyAuto,
			wantRoles: roleMap(1, rollout.RoleFollower), wantSource: SourceDirect, wantLeader: "etcd-main-1", detail: "3 fresh leases agree"},
		{name: "members without leases",
			members: allFollow(id1), mode: SourcePolicyAuto,
			wantRoles: roleMap(1, rollout.RoleFollower), wantSource: SourceDirect, wantLeader: "etcd-main-1", detail: "no fresh lease to cross-check"},
		{name: "lease lags a leadership change: trust members",
			members: allFollow(id2), leases: freshLeases(id0), mode: SourcePolicyAuto,
			wantRoles: roleMap(2, rollout.RoleFollower), wantSource: SourceDirect, wantLeader: "etcd-main-2", mismatch: true,
			detail: "leases disagree: lease etcd-main-0 says Leader, lease etcd-main-2 says Member"},
		{name: "stale lease is ignored, no mismatch",
			members: allFollow(id1),
			leases:  []coordinationv1.Lease{lease("etcd-main-0", id0+":Leader", 5*time.Minute), lease("etcd-main-1", id1+":Leader", time.Second)},
			mode:    SourcePolicyAuto, wantRoles: roleMap(1, rollout.RoleFollower), wantSource: SourceDirect, wantLeader: "etcd-main-1",
			detail: "lease etcd-main-0 (" + id0 + ":Leader) expired 4m45s ago"},
		{name: "lease of a replaced member is not compared",
			members: allFollow(id1), leases: []coordinationv1.Lease{lease("etcd-main-0", "abc:Leader", time.Second)}, mode: SourcePolicyAuto,
			wantRoles: roleMap(1, rollout.RoleFollower), wantSource: SourceDirect, wantLeader: "etcd-main-1",
			detail: "lease etcd-main-0 names member abc but the member's id is " + id0},
		{name: "majority of reachable members, one unreachable",
			members: []MemberReport{unreachable("etcd-main-0", id0), member("etcd-main-1", id1, id1), member("etcd-main-2", id2, id1)},
			mode:    SourcePolicyAuto, wantRoles: roleMap(1, rollout.RoleFollower), wantSource: SourceDirect, wantLeader: "etcd-main-1", detail: "2/2 reachable agree"},
		{name: "leader ids in other spellings",
			members: []MemberReport{member("etcd-main-0", "0x"+id0, "8E9E05C52164694D"), member("etcd-main-1", id1, id0), member("etcd-main-2", id2, "0"+id0)},
			mode:    SourcePolicyAuto, wantRoles: roleMap(0, rollout.RoleFollower), wantSource: SourceDirect, wantLeader: "etcd-main-0"},
		{name: "leader id matches no reported member: known members are followers",
			members: []MemberReport{member("etcd-main-0", id0, "1234"), member("etcd-main-1", id1, "1234")},
			mode:    SourcePolicyAuto, wantSource: SourceDirect,
			wantRoles: map[string]rollout.Role{"etcd-main-0": rollout.RoleFollower, "etcd-main-1": rollout.RoleFollower, "etcd-main-2": rollout.RoleUnknown},
			detail:    "member 1234 is leader"},
		{name: "no majority: split votes fall back to leases",
			members: []MemberReport{member("etcd-main-0", id0, id0), member("etcd-main-1", id1, id1), unreachable("etcd-main-2", id2)},
			leases:  freshLeases(id0), mode: SourcePolicyAuto,
			wantRoles: roleMap(0, rollout.RoleFollower), wantSource: SourceLease, wantLeader: "etcd-main-0",
			detail: "no leader reported by a majority of 2 reachable members (votes " + id0 + ": 1, " + id1 + ": 1)"},
		{name: "no leader (election or quorum loss) falls back to leases",
			members: []MemberReport{member("etcd-main-0", id0, "0"), member("etcd-main-1", id1, "")},
			leases:  freshLeases(id1), mode: SourcePolicyAuto,
			wantRoles: roleMap(1, rollout.RoleFollower), wantSource: SourceLease, wantLeader: "etcd-main-1", detail: "none reports a leader"},
		{name: "none reachable falls back to leases",
			members: []MemberReport{unreachable("etcd-main-0", id0), unreachable("etcd-main-1", id1), unreachable("etcd-main-2", id2)},
			leases:  freshLeases(id2), mode: SourcePolicyAuto,
			wantRoles: roleMap(2, rollout.RoleFollower), wantSource: SourceLease, wantLeader: "etcd-main-2", detail: "none of 3 members reachable"},
		{name: "no member status falls back to leases",
			leases: freshLeases(id2), mode: SourcePolicyAuto,
			wantRoles: roleMap(2, rollout.RoleFollower), wantSource: SourceLease, wantLeader: "etcd-main-2", detail: "no member status; roles from 3 fresh leases"},
		{name: "LeaseOnly ignores members",
			members: allFollow(id1), leases: freshLeases(id0), mode: SourcePolicyLeaseOnly,
			wantRoles: roleMap(0, rollout.RoleFollower), wantSource: SourceLease, wantLeader: "etcd-main-0", detail: "role source is LeaseOnly"},
		{name: "stale and malformed leases give unknown roles",
			leases: []coordinationv1.Lease{
				lease("etcd-main-0", id0+":Leader", time.Hour), lease("etcd-main-1", "garbage", time.Second), lease("etcd-main-2", id2+":Member", time.Second)},
			mode:       SourcePolicyLeaseOnly,
			wantRoles:  map[string]rollout.Role{"etcd-main-0": rollout.RoleUnknown, "etcd-main-1": rollout.RoleUnknown, "etcd-main-2": rollout.RoleFollower},
			wantSource: SourceLease, detail: `lease etcd-main-1 has malformed holder "garbage"`},
		{name: "two fresh leader claims: both unknown",
			leases: []coordinationv1.Lease{
				lease("etcd-main-0", id0+":Leader", time.Second), lease("etcd-main-1", id1+":Leader", 2*time.Second), lease("etcd-main-2", id2+":Member", time.Second)},
			mode:       SourcePolicyLeaseOnly,
			wantRoles:  map[string]rollout.Role{"etcd-main-0": rollout.RoleUnknown, "etcd-main-1": rollout.RoleUnknown, "etcd-main-2": rollout.RoleFollower},
			wantSource: SourceLease, detail: "etcd-main-0, etcd-main-1 all claim Leader"},
		{name: "lease just created by the reconciler (no holder, never renewed)",
			leases: []coordinationv1.Lease{lease("etcd-main-0", "", 0)}, mode: SourcePolicyAuto,
			wantRoles: roleMap(-1, rollout.RoleUnknown), wantSource: SourceNone, detail: "lease etcd-main-0 has no holder"},
		{name: "leases of other clusters are ignored",
			members: allFollow(id1),
			leases:  append(freshLeases(id1), lease("etcd-events-0", "abcd:Leader", time.Second), lease("kube-controller-manager", "host_1234", time.Second)),
			mode:    SourcePolicyAuto, wantRoles: roleMap(1, rollout.RoleFollower), wantSource: SourceDirect, wantLeader: "etcd-main-1", detail: "3 fresh leases agree"},
		{name: "nothing known",
			mode: SourcePolicyAuto, wantRoles: roleMap(-1, rollout.RoleUnknown), wantSource: SourceNone, detail: "no member status; no fresh lease for any pod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Resolve(pods, tc.members, tc.leases, tc.mode, now)
			if !maps.Equal(got.Roles, tc.wantRoles) || got.Source != tc.wantSource || got.LeaderPod != tc.wantLeader || got.Mismatch != tc.mismatch {
				t.Fatalf("Resolve() = %+v\nwant roles %v source %s leader %q mismatch %v", got, tc.wantRoles, tc.wantSource, tc.wantLeader, tc.mismatch)
			}
			if !strings.Contains(got.Detail, tc.detail) {
				t.Errorf("Detail = %q, want it to contain %q", got.Detail, tc.detail)
			}
		})
	}
}

// TestParseHolderIdentity covers the mapping onto the planner's roles; the format itself is
// memberlease's, tested there.
func TestParseHolderIdentity(t *testing.T) {
	cases := []struct {
		in          string
		id, cluster string
		role        rollout.Role
		ok          bool
	}{
		{in: id0 + ":Leader", id: id0, role: rollout.RoleLeader, ok: true},
		{in: id0 + ":Member", id: id0, role: rollout.RoleFollower, ok: true},
		{in: id0 + ":cdf9b6c1a3e4b0f2:Leader", id: id0, cluster: "cdf9b6c1a3e4b0f2", role: rollout.RoleLeader, ok: true},
		{in: "8E9E05C52164694D:Member", id: id0, role: rollout.RoleFollower, ok: true},
		{in: id0 + ":Learner", id: id0, role: rollout.RoleFollower, ok: true}, // the member-agent writes it for learners
		{in: id0 + ":leader"},
		{in: "0:Leader"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			id, cluster, role, ok := ParseHolderIdentity(tc.in)
			if ok != tc.ok || id != tc.id || cluster != tc.cluster || role != tc.role {
				t.Fatalf("ParseHolderIdentity(%q) = %q, %q, %q, %v; want %q, %q, %q, %v", tc.in, id, cluster, role, ok, tc.id, tc.cluster, tc.role, tc.ok)
			}
		})
	}
}

func TestParseSourcePolicy(t *testing.T) {
	for _, s := range []string{"Auto", "LeaseOnly"} {
		if m, err := ParseSourcePolicy(s); err != nil || string(m) != s {
			t.Errorf("ParseSourcePolicy(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseSourcePolicy("auto"); err == nil {
		t.Error("ParseSourcePolicy(auto) accepted a wrongly spelled mode")
	}
}
