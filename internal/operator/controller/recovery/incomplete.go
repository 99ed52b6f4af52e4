package recovery

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
)

// AnnotationAcknowledgeIncompleteRestore on an Etcd, set to its status.clusterID, says a person
// has taken note that the restore which started that cluster left revisions of the backup out.
// Keyed by the cluster ID so an acknowledgement is never carried over to a later restore.
const AnnotationAcknowledgeIncompleteRestore = "etcd-conductor.io/acknowledge-incomplete-restore"

// Reasons of the RestoreIncomplete condition and its Events.
const (
	ReasonRestoreStoppedEarly           = "RestoreStoppedEarly"
	ReasonIncompleteRestoreAcknowledged = "Acknowledged"
)

// restoreIncomplete is the RestoreIncomplete condition for a cluster clusterID that a restore
// started, from what the restore reported (restored, memberlease.RestoreResult of its start
// decision): True when the replay stopped before the chain's end, nil otherwise. A store that did
// not answer never gets here: the restore fails and is tried again (internal/member/restore); only
// verified damage, a delta missing from the chain or a corrupt one, ends a chain early.
func restoreIncomplete(etcd *druidv1alpha1.Etcd, clusterID, restored string, now time.Time) *druidv1alpha1.Condition {
	why := memberlease.RestoreStoppedEarly(restored)
	if why == "" {
		return nil
	}
	return &druidv1alpha1.Condition{
		Type:           druidv1alpha1.ConditionTypeRestoreIncomplete,
		Status:         druidv1alpha1.ConditionTrue,
		Reason:         ReasonRestoreStoppedEarly,
		LastUpdateTime: metav1.NewTime(now),
		Message: fmt.Sprintf("the restore that started cluster %s stopped before the end of the backup: %s. Once the loss is understood, acknowledge it: kubectl annotate etcd -n %s %s %s=%s",
			clusterID, why, etcd.Namespace, etcd.Name, AnnotationAcknowledgeIncompleteRestore, clusterID),
	}
}

// acknowledgeIncompleteRestore turns RestoreIncomplete False once the Etcd carries the
// acknowledgement of its current cluster. Nothing else clears it: a cluster that lost
// acknowledged writes says so until a person has read it.
func (r *Reconciler) acknowledgeIncompleteRestore(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
	c := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeRestoreIncomplete)
	if c == nil || c.Status != druidv1alpha1.ConditionTrue || etcd.Status.ClusterID == "" ||
		etcd.Annotations[AnnotationAcknowledgeIncompleteRestore] != etcd.Status.ClusterID {
		return nil
	}
	message := fmt.Sprintf("acknowledged for cluster %s; before: %s", etcd.Status.ClusterID, c.Message)
	if err := etcdstatus.Patch(ctx, r.cfg.Client, etcd, etcdstatus.WriterRecovery, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = etcdstatus.SetCondition(s.Conditions, druidv1alpha1.Condition{
			Type: druidv1alpha1.ConditionTypeRestoreIncomplete, Status: druidv1alpha1.ConditionFalse,
			Reason: ReasonIncompleteRestoreAcknowledged, Message: message, LastUpdateTime: metav1.NewTime(r.now().UTC()),
		})
	}); err != nil {
		return fmt.Errorf("recording the acknowledged incomplete restore: %w", err)
	}
	r.cfg.Recorder.Event(etcd, corev1.EventTypeNormal, ReasonIncompleteRestoreAcknowledged, message)
	return nil
}
