package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
)

// leaseWriter records snapshots and failures on the two Leases. Recording a snapshot is
// conditional: on the resourceVersion read (a concurrent writer makes it fail) and on the
// revision only going up.
type leaseWriter struct {
	leases coordinationv1client.LeaseInterface
}

func (w leaseWriter) read(ctx context.Context, name string) (memberlease.SnapshotLeaseRecord, string, error) {
	lease, err := w.leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return memberlease.SnapshotLeaseRecord{}, "", fmt.Errorf("read lease %s: %w", name, err)
	}
	return memberlease.ParseSnapshotLease(lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Annotations), lease.ResourceVersion, nil
}

// answer is an on-demand request a snapshot answered: the request's value, recorded under
// annotation (memberlease's full or delta snapshot handled key). The zero answer records none.
type answer struct{ annotation, value string }

// recordSnapshot writes revision and time, unless the Lease already names a higher revision,
// with the request the snapshot answered, if any.
func (w leaseWriter) recordSnapshot(ctx context.Context, name string, rev int64, at time.Time, key string, size int64, ans answer) error {
	current, rv, err := w.read(ctx, name)
	if err != nil {
		return err
	}
	if current.HasRevision && current.Revision > rev {
		return fmt.Errorf("lease %s already records revision %d, above %d: not lowering it", name, current.Revision, rev)
	}
	annotations := map[string]any{
		memberlease.AnnotationSnapshotKey: key, memberlease.AnnotationSnapshotSize: strconv.FormatInt(size, 10),
		memberlease.AnnotationBackupError: nil, memberlease.AnnotationBackupErrorReason: nil, memberlease.AnnotationBackupErrorTime: nil,
	}
	if ans.annotation != "" && ans.value != "" {
		annotations[ans.annotation] = ans.value
	}
	return w.patch(ctx, name, map[string]any{
		"metadata": map[string]any{"resourceVersion": rv, "annotations": annotations},
		"spec": map[string]any{
			"holderIdentity": memberlease.FormatSnapshotRevision(rev),
			"renewTime":      metav1.NewMicroTime(at),
		},
	})
}

// recordFailure sets the error annotations and leaves the last good snapshot as it is.
func (w leaseWriter) recordFailure(ctx context.Context, name, reason, msg string, at time.Time) error {
	return w.patch(ctx, name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		memberlease.AnnotationBackupError: msg, memberlease.AnnotationBackupErrorReason: reason,
		memberlease.AnnotationBackupErrorTime: memberlease.FormatBackupErrorTime(at),
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
