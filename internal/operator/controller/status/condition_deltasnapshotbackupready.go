package status

import (
	"fmt"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// deltaSnapshotCondition is DeltaSnapshotBackupReady: True while the delta snapshot Lease was
// renewed within three periods (at least deltaSnapshotTolerance).
func deltaSnapshotCondition(o Inputs) druidv1alpha1.Condition {
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeDeltaSnapshotBackupReady}
	period := resources.DeltaSnapshotPeriod(o.Etcd)
	if period == 0 {
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionTrue, ReasonDeltaSnapshotsOff, "delta snapshots are off (deltaSnapshotPeriod 0)"
		return c
	}
	lease := o.DeltaSnapshotLease
	rec, last, done := readSnapshotLease(&c, lease, "backup", "the delta snapshot Lease does not exist yet", o.Now)
	if done {
		return c
	}
	tolerance := max(3*period, deltaSnapshotTolerance)
	since := rec.Time
	if since.IsZero() {
		// The first delta follows the first full snapshot.
		since = lease.CreationTimestamp.Time
		tolerance += fullSnapshotGrace
	}
	switch {
	case o.Now.Sub(since) <= tolerance && rec.Time.IsZero():
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionUnknown, ReasonBackupUnknown, "no snapshot yet"
	case o.Now.Sub(since) > tolerance:
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionFalse, ReasonSnapshotMissedSchedule, fmt.Sprintf("%s; deltaSnapshotPeriod is %s", last, period)
	default:
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionTrue, ReasonSnapshotUploadedOnSchedule, last
	}
	return c
}
