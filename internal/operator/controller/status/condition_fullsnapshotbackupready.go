package status

import (
	"fmt"
	"time"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// fullSnapshotCondition is FullSnapshotBackupReady: True while the last full snapshot is no
// later than its schedule allows (fullSnapshotGrace after the next scheduled time).
func fullSnapshotCondition(o Inputs) druidv1alpha1.Condition {
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeFullSnapshotBackupReady}
	schedule, err := memberpod.ParseSchedule(resources.FullSnapshotSchedule(o.Etcd))
	if err != nil {
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionUnknown, ReasonBackupUnknown, err.Error()
		return c
	}
	lease := o.FullSnapshotLease
	rec, last, done := readSnapshotLease(&c, lease, "full snapshot", "the full snapshot Lease does not exist yet", o.Now)
	if done {
		return c
	}
	since := rec.Time
	if since.IsZero() {
		since = lease.CreationTimestamp.Time
	}
	due := schedule.Next(since)
	switch {
	case rec.Time.IsZero() && o.Now.Before(due.Add(fullSnapshotGrace)) && o.Now.Sub(since) < fullSnapshotGrace:
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionUnknown, ReasonBackupUnknown, "no full snapshot yet"
	case o.Now.After(due.Add(fullSnapshotGrace)) || rec.Time.IsZero():
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionFalse, ReasonSnapshotMissedSchedule, fmt.Sprintf("%s; the next was due at %s", last, due.UTC().Format(time.RFC3339))
	default:
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionTrue, ReasonSnapshotUploadedOnSchedule, last
	}
	return c
}
