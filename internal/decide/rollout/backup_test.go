package rollout

import (
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
)

func withBackup(o Observed, holds bool) Observed {
	if holds {
		o.Backup = backupgate.Gate{Holds: true, Reason: "UploadFailed", Message: "full snapshots: store unreachable"}
	}
	return o
}

// TestRuleBackupReady: DEP-01 postpones rolling updates while BackupReady is False: no
// participating member is replaced and no leadership moves; a member that does not participate
// is still replaced, and with the gate open the rollout goes on as before.
func TestRuleBackupReady(t *testing.T) {
	three := func() Observed {
		return observed(3, pod("etcd-main-0").outdated().follower(), pod("etcd-main-1").outdated().follower(), pod("etcd-main-2").outdated().leader())
	}
	runPlanCases(t, []planCase{
		{name: "gate open: a follower goes", in: three(), action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleParticipatingFollower},
		{name: "gate holds: waits, saying why", in: withBackup(three(), true), action: ActionWait, rule: RuleBackupNotReady,
			reasonHas: []string{"BackupReady is False (UploadFailed)", "store unreachable", "waitForBackupReady"}},
		{name: "gate holds: the leader's handover waits too",
			in:     withBackup(observed(3, pod("etcd-main-0"), pod("etcd-main-1"), pod("etcd-main-2").outdated().leader().reported(5)), true),
			action: ActionWait, rule: RuleBackupNotReady},
		{name: "gate holds: a dead outdated member is still replaced",
			in:     withBackup(observed(3, pod("etcd-main-0").outdated().dead(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated().leader()), true),
			action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleNonParticipatingDead},
		{name: "gate holds: single node waits",
			in:     withBackup(observed(1, pod("etcd-main-0").outdated()), true),
			action: ActionWait, rule: RuleBackupNotReady},
		{name: "gate holds: nothing outdated, done", in: withBackup(observed(3, pod("etcd-main-0"), pod("etcd-main-1"), pod("etcd-main-2")), true),
			action: ActionDone, rule: RuleDone},
	})
}

// TestHeldByOperationRechecksBackup: the re-check right before a deletion sees a BackupReady
// that turned False since the decision.
func TestHeldByOperationRechecksBackup(t *testing.T) {
	o := observed(3, pod("etcd-main-0").outdated(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated().leader())
	if _, held := HeldByOperation(o); held {
		t.Fatal("held with the gate open")
	}
	d, held := HeldByOperation(withBackup(o, true))
	if !held || d.Rule != RuleBackupNotReady {
		t.Fatalf("HeldByOperation = %v %s, want held by %s", held, d.Rule, RuleBackupNotReady)
	}
}
