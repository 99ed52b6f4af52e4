package backupgate

import (
	"strings"
	"testing"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

func etcdWith(store bool, backup druidv1alpha1.ConditionStatus) *druidv1alpha1.Etcd {
	e := &druidv1alpha1.Etcd{}
	if store {
		p := druidv1alpha1.StorageProvider("S3")
		e.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{Provider: &p}}
	}
	if backup != "" {
		e.Status.Conditions = []druidv1alpha1.Condition{{Type: druidv1alpha1.ConditionTypeBackupReady, Status: backup,
			Reason: "UploadFailed", Message: "full snapshots: store unreachable"}}
	}
	return e
}

// TestOf: the gate holds only with the switch on, a store configured and BackupReady False.
func TestOf(t *testing.T) {
	const (
		T = druidv1alpha1.ConditionTrue
		F = druidv1alpha1.ConditionFalse
		U = druidv1alpha1.ConditionUnknown
	)
	for _, tt := range []struct {
		name  string
		etcd  *druidv1alpha1.Etcd
		on    bool
		holds bool
	}{
		{"False, store, on", etcdWith(true, F), true, true},
		{"False, store, off", etcdWith(true, F), false, false},
		{"False, no store (a stale condition)", etcdWith(false, F), true, false},
		{"True", etcdWith(true, T), true, false},
		{"Unknown", etcdWith(true, U), true, false},
		{"not reported yet", etcdWith(true, ""), true, false},
		{"no Etcd (a saved state without one)", nil, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := Of(tt.etcd, tt.on)
			if g.Holds != tt.holds {
				t.Fatalf("Holds = %v, want %v", g.Holds, tt.holds)
			}
			if g.Holds && !strings.Contains(g.Waiting("x"), "BackupReady is False (UploadFailed): full snapshots: store unreachable") {
				t.Errorf("Waiting = %q does not say why", g.Waiting("x"))
			}
		})
	}
}

func TestRuleReasons(t *testing.T) {
	if got := ruleid.ID("defrag/" + Wait).CamelCase(); got != "DefragWaitBackupNotReady" {
		t.Errorf("defrag's reason %q", got)
	}
}
