package memberaccess

import "testing"

// TestPoolKeyKeepsEachCallersKey: the keys stay those the callers spelled themselves before
// PoolKey. The pool closes the connections a call leaves out of its targets, so callers that dial
// other pods must never share a key, and those that dial the same pods share one connection each.
func TestPoolKeyKeepsEachCallersKey(t *testing.T) {
	for p, want := range map[Purpose]string{
		ForMembers:    "shoot/etcd-main",
		ForMembership: "shoot/etcd-main/membership",
		ForRecovery:   "shoot/etcd-main/recovery",
		ForPlan:       "shoot/etcd-main/plan",
	} {
		if got := PoolKey("shoot", "etcd-main", p); got != want {
			t.Errorf("PoolKey(%q) = %q, want %q", p, got, want)
		}
	}
}
