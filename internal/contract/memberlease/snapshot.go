package memberlease

import (
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// FullSnapshotLeaseName and DeltaSnapshotLeaseName are etcd-druid's snapshot Lease names, kept
// so druid's tools find our backups' progress where they look for it.
func FullSnapshotLeaseName(e *druidv1alpha1.Etcd) string  { return e.Name + "-full-snap" }
func DeltaSnapshotLeaseName(e *druidv1alpha1.Etcd) string { return e.Name + "-delta-snap" }

// Annotations on the full and delta snapshot Leases. holderIdentity is the latest revision
// uploaded (FormatSnapshotRevision) and renewTime when (etcd-druid's convention); these add what
// druid keeps in its sidecar's logs: the last failure, and the on-demand full and delta snapshot
// hand-overs.
const (
	// AnnotationBackupError is the last failure's message; removed by the next success.
	AnnotationBackupError = "etcd-conductor.io/backup-error"
	// AnnotationBackupErrorReason is its reason, one of the Reason* values below.
	AnnotationBackupErrorReason = "etcd-conductor.io/backup-error-reason"
	// AnnotationBackupErrorTime is when it happened (RFC 3339).
	AnnotationBackupErrorTime = "etcd-conductor.io/backup-error-time"
	// AnnotationSnapshotKey is the store key of the snapshot holderIdentity refers to.
	AnnotationSnapshotKey = "etcd-conductor.io/snapshot-key"
	// AnnotationSnapshotSize is its size in bytes.
	AnnotationSnapshotSize = "etcd-conductor.io/snapshot-size"
	// AnnotationFullSnapshotRequest, on the full snapshot Lease, asks the leading member's
	// backup loop for a full snapshot; the operator copies it there from the Etcd's
	// full-snapshot annotation, or writes one after a restore.
	AnnotationFullSnapshotRequest = "etcd-conductor.io/full-snapshot-requested"
	// AnnotationFullSnapshotHandled is the last request a full snapshot answered.
	AnnotationFullSnapshotHandled = "etcd-conductor.io/full-snapshot-handled"
	// AnnotationFullSnapshotFromEtcd, on the full snapshot Lease, is the Etcd's full-snapshot
	// annotation as the operator last handed it on: a value is handed on once, so a request
	// written since by someone else (an EtcdOpsTask) is not overwritten by an old one.
	AnnotationFullSnapshotFromEtcd = "etcd-conductor.io/full-snapshot-from-etcd"
	// AnnotationDeltaSnapshotRequest, on the delta snapshot Lease, asks the leading member's
	// backup loop for a delta snapshot now; the operator writes it for an EtcdOpsTask.
	AnnotationDeltaSnapshotRequest = "etcd-conductor.io/delta-snapshot-requested"
	// AnnotationDeltaSnapshotHandled is the last request a delta snapshot answered.
	AnnotationDeltaSnapshotHandled = "etcd-conductor.io/delta-snapshot-handled"
)

// Failure reasons, as AnnotationBackupErrorReason carries them and the BackupReady conditions
// show them.
const (
	ReasonStoreInvalid     = "StoreInvalid"
	ReasonStoreUnreachable = "StoreUnreachable"
	ReasonUploadFailed     = "UploadFailed"
	ReasonSnapshotFailed   = "SnapshotFailed"
	// ReasonStoreShared: the store's prefix belongs to another Etcd; this one neither writes,
	// deletes nor restores there.
	ReasonStoreShared = "StoreShared"
)

// FormatSnapshotRevision is a snapshot Lease's holderIdentity: the revision in decimal.
func FormatSnapshotRevision(rev int64) string { return strconv.FormatInt(rev, 10) }

// FormatBackupErrorTime is AnnotationBackupErrorTime's value.
func FormatBackupErrorTime(at time.Time) string { return at.UTC().Format(time.RFC3339Nano) }

// SnapshotLeaseRecord is what a snapshot Lease says, parsed.
type SnapshotLeaseRecord struct {
	Revision    int64
	HasRevision bool
	Time        time.Time
	Key         string
	Size        int64
	Error       string
	ErrorReason string
	ErrorTime   time.Time
	// Requested and Handled are the full snapshot requests (full snapshot Lease).
	Requested string
	Handled   string
	// DeltaRequested and DeltaHandled are the delta snapshot requests (delta snapshot Lease).
	DeltaRequested string
	DeltaHandled   string
}

// Pending says whether a request is written and not yet answered.
func Pending(requested, handled string) bool { return requested != "" && requested != handled }

// ParseSnapshotLease reads holderIdentity, renewTime and the annotations; unparseable values are
// left zero rather than failing, since a user may have edited the Lease.
func ParseSnapshotLease(holder *string, renew *metav1.MicroTime, annotations map[string]string) SnapshotLeaseRecord {
	var r SnapshotLeaseRecord
	if holder != nil {
		if rev, err := strconv.ParseInt(strings.TrimSpace(*holder), 10, 64); err == nil {
			r.Revision, r.HasRevision = rev, true
		}
	}
	if renew != nil {
		r.Time = renew.Time
	}
	r.Key = annotations[AnnotationSnapshotKey]
	r.Size, _ = strconv.ParseInt(annotations[AnnotationSnapshotSize], 10, 64)
	r.Error, r.ErrorReason = annotations[AnnotationBackupError], annotations[AnnotationBackupErrorReason]
	r.ErrorTime, _ = time.Parse(time.RFC3339Nano, annotations[AnnotationBackupErrorTime])
	r.Requested, r.Handled = annotations[AnnotationFullSnapshotRequest], annotations[AnnotationFullSnapshotHandled]
	r.DeltaRequested, r.DeltaHandled = annotations[AnnotationDeltaSnapshotRequest], annotations[AnnotationDeltaSnapshotHandled]
	return r
}
