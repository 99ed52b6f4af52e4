package memberlease

import "testing"

const id0 = "8e9e05c52164694d"

func TestHolderIdentity(t *testing.T) {
	tests := []struct {
		name      string
		memberID  uint64
		clusterID uint64
		leader    bool
		want      string
		wantRole  string
	}{
		{name: "leader", memberID: 0x8e9e05c52164694d, clusterID: 0xcdf818194e3a8c32, leader: true,
			want: "8e9e05c52164694d:cdf818194e3a8c32:Leader", wantRole: RoleLeader},
		{name: "follower", memberID: 0x8e9e05c52164694d, clusterID: 0xcdf818194e3a8c32,
			want: "8e9e05c52164694d:cdf818194e3a8c32:Member", wantRole: RoleMember},
		{name: "no zero padding", memberID: 0xabc, clusterID: 0x1,
			want: "abc:1:Member", wantRole: RoleMember},
		{name: "largest IDs", memberID: ^uint64(0), clusterID: ^uint64(0), leader: true,
			want: "ffffffffffffffff:ffffffffffffffff:Leader", wantRole: RoleLeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HolderIdentity(tt.memberID, tt.clusterID, tt.leader)
			if got != tt.want {
				t.Fatalf("HolderIdentity = %q, want %q", got, tt.want)
			}
			// What the sidecar writes, the operator must read back.
			h, ok := ParseHolderIdentity(got)
			if !ok || h.Role != tt.wantRole {
				t.Fatalf("ParseHolderIdentity(%q) = %+v, %v; want role %q", got, h, ok, tt.wantRole)
			}
		})
	}
}

func TestLearnerHolderIdentity(t *testing.T) {
	tests := []struct {
		name        string
		holder      string
		wantLearner bool
	}{
		{name: "learner", holder: LearnerHolderIdentity(0x8e9e05c52164694d, 0xcdf9b6c1a3e4b0f2), wantLearner: true},
		{name: "voter", holder: HolderIdentity(1, 2, false)},
		{name: "leader", holder: HolderIdentity(1, 2, true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsLearnerIdentity(tt.holder); got != tt.wantLearner {
				t.Fatalf("IsLearnerIdentity(%q) = %v, want %v", tt.holder, got, tt.wantLearner)
			}
		})
	}
	if got := LearnerHolderIdentity(0x8e9e05c52164694d, 0xcdf9b6c1a3e4b0f2); got != "8e9e05c52164694d:cdf9b6c1a3e4b0f2:Learner" {
		t.Errorf("LearnerHolderIdentity = %q", got)
	}
}

func TestParseHolderIdentity(t *testing.T) {
	cases := []struct {
		in   string
		want Holder
		ok   bool
	}{
		{in: id0 + ":Leader", want: Holder{MemberID: id0, Role: RoleLeader}, ok: true},
		{in: id0 + ":Member", want: Holder{MemberID: id0, Role: RoleMember}, ok: true},
		{in: id0 + ":cdf9b6c1a3e4b0f2:Leader", want: Holder{MemberID: id0, ClusterID: "cdf9b6c1a3e4b0f2", Role: RoleLeader}, ok: true},
		{in: "8E9E05C52164694D:Member", want: Holder{MemberID: id0, Role: RoleMember}, ok: true},
		{in: id0 + ":Learner", want: Holder{MemberID: id0, Role: RoleLearner}, ok: true},
		{in: id0 + ":learner"},
		{in: id0 + ":leader"},
		{in: id0},
		{in: ""},
		{in: ":Leader"},
		{in: "0:Leader"},
		{in: "xyz:Leader"},
		{in: id0 + "::Leader"},
		{in: "a:b:c:Leader"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := ParseHolderIdentity(tc.in)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("ParseHolderIdentity(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}
