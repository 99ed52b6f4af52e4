package backupgate

import (
	"fmt"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// Wait is the wait every planner that reads the gate names while it holds, each under its own
// qualifier: rollout's rule is "rollout/" + Wait, whose CamelCase (RolloutWaitBackupNotReady) is
// the condition and Event reason.
const Wait = "wait/backup-not-ready"

// Gate is whether voluntary disruptions of one Etcd wait for its backup now.
type Gate struct {
	// Holds: waiting is configured (controllers.etcd.waitForBackupReady), the Etcd has a backup
	// store, and its BackupReady condition is False. Unknown (no snapshot reported yet, a
	// status not computed yet) does not hold: DEP-01 postpones on False only.
	Holds bool `json:"holds,omitempty"`
	// Reason and Message are the BackupReady condition's, shown in the waits it causes.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Enabled is the operator-wide switch for etcd: configured on, and a backup store to wait for.
func Enabled(etcd *druidv1alpha1.Etcd, waitForBackupReady bool) bool {
	if !waitForBackupReady || etcd == nil || etcd.Spec.Backup == nil || etcd.Spec.Backup.Store == nil {
		return false
	}
	p := etcd.Spec.Backup.Store.Provider
	return p != nil && string(*p) != ""
}

// Of reads the gate from etcd's status. waitForBackupReady is the operator's switch; a nil etcd
// (a saved state without one) never holds.
func Of(etcd *druidv1alpha1.Etcd, waitForBackupReady bool) Gate {
	if !Enabled(etcd, waitForBackupReady) {
		return Gate{}
	}
	c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeBackupReady)
	if c == nil || c.Status != druidv1alpha1.ConditionFalse {
		return Gate{}
	}
	return Gate{Holds: true, Reason: c.Reason, Message: c.Message}
}

// Describe says why the gate holds, for a planner's reason.
func (g Gate) Describe() string {
	s := "BackupReady is False"
	if g.Reason != "" {
		s += " (" + g.Reason + ")"
	}
	if g.Message != "" {
		s += ": " + g.Message
	}
	return s
}

// Waiting is the planners' wait reason: what waits, why, and how to lift it.
func (g Gate) Waiting(what string) string {
	return fmt.Sprintf("%s waits while %s; it goes on once a backup succeeds (controllers.etcd.waitForBackupReady: false lifts this)", what, g.Describe())
}
