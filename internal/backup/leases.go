package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Annotations on the full and delta snapshot Leases. holderIdentity is the latest revision
// uploaded and renewTime when (etcd-druid's convention); these add what druid keeps in its
// sidecar's logs: the last failure, and the on-demand full snapshot hand-over.
const (
	// AnnotationError is the last failure's message; removed by the next success.
	AnnotationError = "etcd-conductor.io/backup-error"
	// AnnotationErrorReason is its CamelCase reason (StoreUnreachable, StoreInvalid, …).
	AnnotationErrorReason = "etcd-conductor.io/backup-error-reason"
	// AnnotationErrorTime is when it happened (RFC 3339).
	AnnotationErrorTime = "etcd-conductor.io/backup-error-time"
	// AnnotationKey is the store key of the snapshot holderIdentity refers to.
	AnnotationKey = "etcd-conductor.io/snapshot-key"
	// AnnotationSize is its size in bytes.
	AnnotationSize = "etcd-conductor.io/snapshot-size"
	// AnnotationFullSnapshotRequest, on the full snapshot Lease, asks for a full snapshot; the
	// operator copies it there from the Etcd's AnnotationFullSnapshot.
	AnnotationFullSnapshotRequest = "etcd-conductor.io/full-snapshot-requested"
	// AnnotationFullSnapshotHandled is the last request a full snapshot answered.
	AnnotationFullSnapshotHandled = "etcd-conductor.io/full-snapshot-handled"
	// AnnotationFullSnapshot, on an Etcd, requests an out-of-schedule full snapshot: any new
	// value (a timestamp, say) triggers one.
	AnnotationFullSnapshot = "etcd-conductor.io/full-snapshot"
)

// Failure reasons, as the snapshot Leases carry them and the BackupReady conditions show them.
const (
	ReasonStoreInvalid     = "StoreInvalid"
	ReasonStoreUnreachable = "StoreUnreachable"
	ReasonUploadFailed     = "UploadFailed"
	ReasonSnapshotFailed   = "SnapshotFailed"
)

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
	Requested   string
	Handled     string
}

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
	r.Key = annotations[AnnotationKey]
	r.Size, _ = strconv.ParseInt(annotations[AnnotationSize], 10, 64)
	r.Error, r.ErrorReason = annotations[AnnotationError], annotations[AnnotationErrorReason]
	r.ErrorTime, _ = time.Parse(time.RFC3339Nano, annotations[AnnotationErrorTime])
	r.Requested, r.Handled = annotations[AnnotationFullSnapshotRequest], annotations[AnnotationFullSnapshotHandled]
	return r
}

// leaseWriter records snapshots and failures on the two Leases. Recording a snapshot is
// conditional: on the resourceVersion read (a concurrent writer makes it fail) and on the
// revision only going up.
type leaseWriter struct {
	leases coordinationv1client.LeaseInterface
}

func (w leaseWriter) read(ctx context.Context, name string) (SnapshotLeaseRecord, string, error) {
	lease, err := w.leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return SnapshotLeaseRecord{}, "", fmt.Errorf("read lease %s: %w", name, err)
	}
	return ParseSnapshotLease(lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Annotations), lease.ResourceVersion, nil
}

// recordSnapshot writes revision and time, unless the Lease already names a higher revision.
// handled, if set, answers an on-demand request.
func (w leaseWriter) recordSnapshot(ctx context.Context, name string, rev int64, at time.Time, key string, size int64, handled string) error {
	current, rv, err := w.read(ctx, name)
	if err != nil {
		return err
	}
	if current.HasRevision && current.Revision > rev {
		return fmt.Errorf("lease %s already records revision %d, above %d: not lowering it", name, current.Revision, rev)
	}
	annotations := map[string]any{
		AnnotationKey: key, AnnotationSize: strconv.FormatInt(size, 10),
		AnnotationError: nil, AnnotationErrorReason: nil, AnnotationErrorTime: nil,
	}
	if handled != "" {
		annotations[AnnotationFullSnapshotHandled] = handled
	}
	return w.patch(ctx, name, map[string]any{
		"metadata": map[string]any{"resourceVersion": rv, "annotations": annotations},
		"spec": map[string]any{
			"holderIdentity": strconv.FormatInt(rev, 10),
			"renewTime":      metav1.NewMicroTime(at),
		},
	})
}

// recordFailure sets the error annotations and leaves the last good snapshot as it is.
func (w leaseWriter) recordFailure(ctx context.Context, name, reason, msg string, at time.Time) error {
	return w.patch(ctx, name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		AnnotationError: msg, AnnotationErrorReason: reason, AnnotationErrorTime: at.UTC().Format(time.RFC3339Nano),
	}}})
}

func (w leaseWriter) patch(ctx context.Context, name string, body map[string]any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode lease patch: %w", err)
	}
	_, err = w.leases.Patch(ctx, name, types.MergePatchType, raw, metav1.PatchOptions{})
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("lease %s changed while it was being updated: %w", name, err)
	case err != nil:
		return fmt.Errorf("update lease %s: %w", name, err)
	}
	return nil
}
