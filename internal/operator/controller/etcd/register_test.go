package etcd

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// TestDisruptionHealthChanged: the Etcd reconciler is woken by the status changes its PDB
// follows, and by no other status change.
func TestDisruptionHealthChanged(t *testing.T) {
	base := func() *druidv1alpha1.Etcd {
		return &druidv1alpha1.Etcd{Status: druidv1alpha1.EtcdStatus{
			Conditions: []druidv1alpha1.Condition{
				{Type: druidv1alpha1.ConditionTypeAllMembersReady, Status: druidv1alpha1.ConditionTrue},
				{Type: druidv1alpha1.ConditionTypeBackupReady, Status: druidv1alpha1.ConditionTrue},
				{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionTrue},
			},
			Members: []druidv1alpha1.EtcdMemberStatus{{Name: "a", Status: druidv1alpha1.EtcdMemberStatusReady}, {Name: "b", Status: druidv1alpha1.EtcdMemberStatusReady}},
		}}
	}
	for _, tt := range []struct {
		name   string
		change func(e *druidv1alpha1.Etcd)
		want   bool
	}{
		{"nothing", func(*druidv1alpha1.Etcd) {}, false},
		{"AllMembersReady False", func(e *druidv1alpha1.Etcd) { e.Status.Conditions[0].Status = druidv1alpha1.ConditionFalse }, true},
		{"BackupReady False", func(e *druidv1alpha1.Etcd) { e.Status.Conditions[1].Status = druidv1alpha1.ConditionFalse }, true},
		{"a member not ready", func(e *druidv1alpha1.Etcd) { e.Status.Members[1].Status = druidv1alpha1.EtcdMemberStatusNotReady }, true},
		{"a message only", func(e *druidv1alpha1.Etcd) { e.Status.Conditions[1].Message = "last full snapshot 5m ago" }, false},
		{"another condition", func(e *druidv1alpha1.Etcd) { e.Status.Conditions[2].Status = druidv1alpha1.ConditionFalse }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			newEtcd := base()
			tt.change(newEtcd)
			if got := disruptionHealthChanged.Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: newEtcd}); got != tt.want {
				t.Errorf("woken = %v, want %v", got, tt.want)
			}
		})
	}
}
