package status

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
)

func TestBackupConditions(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 30, 0, 0, time.UTC)
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{
		Replicas: 3,
		Backup: &druidv1alpha1.BackupSpec{
			FullSnapshotSchedule: ptr.To("0 * * * *"),
			DeltaSnapshotPeriod:  &metav1.Duration{Duration: 10 * time.Second},
			Store:                &druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("aws")), Container: ptr.To("b")},
		},
	}}
	lease := func(rev string, at time.Time, annotations map[string]string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour)), Annotations: annotations}}
		if rev != "" {
			l.Spec.HolderIdentity = ptr.To(rev)
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(at))
		}
		return l
	}
	failure := func(reason string, at time.Time) map[string]string {
		return map[string]string{memberlease.AnnotationBackupError: "dial tcp 10.0.0.1:7070: connection refused", memberlease.AnnotationBackupErrorReason: reason, memberlease.AnnotationBackupErrorTime: at.Format(time.RFC3339Nano)}
	}
	tests := []struct {
		name        string
		full, delta *coordinationv1.Lease
		want        [3]druidv1alpha1.ConditionStatus // BackupReady, Full, Delta
		reason      string                           // BackupReady's
		message     string
	}{
		{"both fresh", lease("100", now.Add(-20*time.Minute), nil), lease("150", now.Add(-5*time.Second), nil),
			[3]druidv1alpha1.ConditionStatus{"True", "True", "True"}, ReasonBackupSucceeded, "last full snapshot at revision 100, 20m0s ago"},
		{"store unreachable after the last delta", lease("100", now.Add(-20*time.Minute), nil), lease("150", now.Add(-15*time.Second), failure(memberlease.ReasonStoreUnreachable, now.Add(-3*time.Second))),
			[3]druidv1alpha1.ConditionStatus{"False", "True", "False"}, memberlease.ReasonStoreUnreachable, "connection refused"},
		{"an old failure does not count", lease("100", now.Add(-20*time.Minute), nil), lease("150", now.Add(-2*time.Second), failure(memberlease.ReasonStoreUnreachable, now.Add(-time.Minute))),
			[3]druidv1alpha1.ConditionStatus{"True", "True", "True"}, ReasonBackupSucceeded, ""},
		{"full snapshot missed its schedule", lease("100", now.Add(-3*time.Hour), nil), lease("150", now.Add(-2*time.Second), nil),
			[3]druidv1alpha1.ConditionStatus{"False", "False", "True"}, ReasonSnapshotMissedSchedule, "last full snapshot at revision 100, 3h0m0s ago"},
		{"deltas stalled", lease("100", now.Add(-20*time.Minute), nil), lease("150", now.Add(-2*time.Minute), nil),
			[3]druidv1alpha1.ConditionStatus{"False", "True", "False"}, ReasonSnapshotMissedSchedule, "2m0s ago"},
		{"no leases yet", nil, nil, [3]druidv1alpha1.ConditionStatus{"Unknown", "Unknown", "Unknown"}, ReasonBackupUnknown, ""},
		{"bad store from the start", lease("", time.Time{}, failure(memberlease.ReasonStoreInvalid, now)), lease("", time.Time{}, failure(memberlease.ReasonStoreInvalid, now)),
			[3]druidv1alpha1.ConditionStatus{"False", "False", "False"}, memberlease.ReasonStoreInvalid, "no full snapshot yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conds := backupConditions(Inputs{Etcd: etcd, FullSnapshotLease: tt.full, DeltaSnapshotLease: tt.delta, Now: now})
			if len(conds) != 3 {
				t.Fatalf("%d conditions", len(conds))
			}
			for i, typ := range []druidv1alpha1.ConditionType{druidv1alpha1.ConditionTypeBackupReady, druidv1alpha1.ConditionTypeFullSnapshotBackupReady, druidv1alpha1.ConditionTypeDeltaSnapshotBackupReady} {
				if conds[i].Type != typ || conds[i].Status != tt.want[i] || !conditionReason.MatchString(conds[i].Reason) {
					t.Errorf("%s = %s/%s %q, want %s", conds[i].Type, conds[i].Status, conds[i].Reason, conds[i].Message, tt.want[i])
				}
			}
			if conds[0].Reason != tt.reason || !strings.Contains(conds[0].Message, tt.message) {
				t.Errorf("BackupReady %s %q, want reason %s containing %q", conds[0].Reason, conds[0].Message, tt.reason, tt.message)
			}
		})
	}
	etcd.Spec.Backup.Store.Provider = ptr.To(druidv1alpha1.StorageProvider("floppy"))
	conds := backupConditions(Inputs{Etcd: etcd, Now: now})
	if conds[0].Status != druidv1alpha1.ConditionFalse || conds[0].Reason != memberlease.ReasonStoreInvalid || !strings.Contains(conds[0].Message, "floppy") {
		t.Fatalf("unknown provider: BackupReady %+v", conds[0])
	}
	etcd.Spec.Backup.Store = nil
	if conds := backupConditions(Inputs{Etcd: etcd, Now: now}); conds != nil {
		t.Fatalf("conditions without a store: %+v", conds)
	}
}
