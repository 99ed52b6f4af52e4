package memberagent_test

import (
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/memberagent"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/rollout"
)

func TestHolderIdentity(t *testing.T) {
	tests := []struct {
		name      string
		memberID  uint64
		clusterID uint64
		leader    bool
		want      string
		wantRole  rollout.Role
	}{
		{name: "leader", memberID: 0x8e9e05c52164694d, clusterID: 0xcdf818194e3a8c32, leader: true,
			want: "8e9e05c52164694d:cdf818194e3a8c32:Leader", wantRole: rollout.RoleLeader},
		{name: "follower", memberID: 0x8e9e05c52164694d, clusterID: 0xcdf818194e3a8c32,
			want: "8e9e05c52164694d:cdf818194e3a8c32:Member", wantRole: rollout.RoleFollower},
		{name: "no zero padding", memberID: 0xabc, clusterID: 0x1,
			want: "abc:1:Member", wantRole: rollout.RoleFollower},
		{name: "largest IDs", memberID: ^uint64(0), clusterID: ^uint64(0), leader: true,
			want: "ffffffffffffffff:ffffffffffffffff:Leader", wantRole: rollout.RoleLeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := memberagent.HolderIdentity(tt.memberID, tt.clusterID, tt.leader)
			if got != tt.want {
				t.Fatalf("HolderIdentity = %q, want %q", got, tt.want)
			}
			// The operator's parser is the other half of this contract.
			_, _, role, ok := roles.ParseHolderIdentity(got)
			if !ok || role != tt.wantRole {
				t.Fatalf("roles.ParseHolderIdentity(%q) = %q, %v; want %q", got, role, ok, tt.wantRole)
			}
		})
	}
}

func TestLearnerHolderIdentity(t *testing.T) {
	got := memberagent.LearnerHolderIdentity(0x8e9e05c52164694d, 0xcdf9b6c1a3e4b0f2)
	if got != "8e9e05c52164694d:cdf9b6c1a3e4b0f2:Learner" || !memberagent.IsLearnerIdentity(got) {
		t.Errorf("learner identity %q", got)
	}
	if memberagent.IsLearnerIdentity(memberagent.HolderIdentity(1, 2, false)) {
		t.Error("a voter's identity read as a learner's")
	}
}
