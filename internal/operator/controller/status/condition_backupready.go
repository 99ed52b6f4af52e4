package status

import (
	"fmt"
	"regexp"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Backup condition reasons (etcd-druid's, plus the member-agent's failure reasons, e.g.
// StoreUnreachable, StoreInvalid, UploadFailed, SnapshotFailed, taken from the snapshot Leases).
const (
	ReasonSnapshotUploadedOnSchedule = "SnapshotUploadedOnSchedule"
	ReasonSnapshotMissedSchedule     = "SnapshotMissedSchedule"
	ReasonBackupSucceeded            = "BackupSucceeded"
	ReasonBackupUnknown              = "Unknown"
	ReasonDeltaSnapshotsOff          = "DeltaSnapshotsDisabled"
)

// fullSnapshotGrace is how late a scheduled full snapshot may be before it counts as missed: it
// takes time to stream and upload a large database.
const fullSnapshotGrace = 5 * time.Minute

// deltaSnapshotTolerance is the least time a delta snapshot may be overdue; otherwise three
// periods, as etcd-druid.
const deltaSnapshotTolerance = 30 * time.Second

// conditionReason is what the API accepts as a condition reason.
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// backupConditions are FullSnapshotBackupReady, DeltaSnapshotBackupReady and BackupReady from
// the snapshot Leases the leading member-agent writes; none when no backup store is configured.
// A failure the agent reported after its last good snapshot makes a condition False with the
// failure's reason at once; otherwise a snapshot that is overdue does. Each message carries the
// age of the last good snapshot.
func backupConditions(o Inputs) []druidv1alpha1.Condition {
	if !resources.BackupEnabled(o.Etcd) {
		return nil
	}
	full := fullSnapshotCondition(o)
	delta := deltaSnapshotCondition(o)
	if _, err := backupstore.ParseProvider(string(*o.Etcd.Spec.Backup.Store.Provider)); err != nil {
		// No agent can build this store; say so without waiting for one to report it.
		for _, c := range []*druidv1alpha1.Condition{&full, &delta} {
			c.Status, c.Reason, c.Message = druidv1alpha1.ConditionFalse, memberlease.ReasonStoreInvalid, err.Error()
		}
	}
	ready := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeBackupReady}
	switch {
	case full.Status == druidv1alpha1.ConditionFalse:
		ready.Status, ready.Reason, ready.Message = full.Status, full.Reason, "full snapshots: "+full.Message
	case delta.Status == druidv1alpha1.ConditionFalse:
		ready.Status, ready.Reason, ready.Message = delta.Status, delta.Reason, "delta snapshots: "+delta.Message
	case full.Status == druidv1alpha1.ConditionTrue && delta.Status == druidv1alpha1.ConditionTrue:
		ready.Status, ready.Reason, ready.Message = druidv1alpha1.ConditionTrue, ReasonBackupSucceeded, full.Message+"; "+delta.Message
	default:
		ready.Status, ready.Reason, ready.Message = druidv1alpha1.ConditionUnknown, ReasonBackupUnknown, full.Message+"; "+delta.Message
	}
	return []druidv1alpha1.Condition{ready, full, delta}
}

// failing: the agent reported a failure after its last good snapshot.
func failing(rec memberlease.SnapshotLeaseRecord) bool {
	return rec.Error != "" && (rec.Time.IsZero() || rec.ErrorTime.After(rec.Time))
}

func failureReason(rec memberlease.SnapshotLeaseRecord) string {
	if conditionReason.MatchString(rec.ErrorReason) {
		return rec.ErrorReason
	}
	return memberlease.ReasonUploadFailed
}

func describeLast(what string, rec memberlease.SnapshotLeaseRecord, now time.Time) string {
	if rec.Time.IsZero() || !rec.HasRevision {
		return "no " + what + " yet"
	}
	return fmt.Sprintf("last %s at revision %d, %s ago", what, rec.Revision, age(rec.Time, now))
}

// age is coarse on purpose: the message is rewritten only when it changes, and a finer age would
// rewrite the status (and wake every controller watching the Etcd) on each resync.
func age(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "less than 1m"
	case d < time.Hour:
		return d.Truncate(time.Minute).String()
	default:
		return d.Truncate(10 * time.Minute).String()
	}
}

// snapshotLease finds a Lease by name.
func snapshotLease(leases []coordinationv1.Lease, name string) *coordinationv1.Lease {
	for i := range leases {
		if leases[i].Name == name {
			return &leases[i]
		}
	}
	return nil
}

// readSnapshotLease is what both snapshot conditions start with: a missing Lease is Unknown and
// a recorded failure is False, each written into c with done set; otherwise it returns the
// Lease's record and its "last snapshot" phrase for the caller to judge against the schedule.
func readSnapshotLease(c *druidv1alpha1.Condition, lease *coordinationv1.Lease, what, missing string, now time.Time) (rec memberlease.SnapshotLeaseRecord, last string, done bool) {
	if lease == nil {
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionUnknown, ReasonBackupUnknown, missing
		return rec, "", true
	}
	rec = memberlease.ParseSnapshotLease(lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Annotations)
	last = describeLast(what, rec, now)
	if failing(rec) {
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionFalse, failureReason(rec), fmt.Sprintf("failing since %s ago: %s; %s", age(rec.ErrorTime, now), rec.Error, last)
		return rec, last, true
	}
	return rec, last, false
}
