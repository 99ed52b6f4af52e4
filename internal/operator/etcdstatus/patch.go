package etcdstatus

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// Writer names one of the controllers that write Etcd status. Each owns a disjoint set of
// fields, conditions by type, and writes them through Patch, the one status writing path, so the
// writers never overwrite each other:
//
//   - WriterEtcd (the Etcd reconciler): observedGeneration, lastErrors and the conditions
//     UpdateStrategyHeld, VersionChange and VolumeChange;
//   - WriterOnDelete (the OnDelete controller): lastOperation;
//   - WriterStatus (the status controller): members, replicas, readyReplicas, currentReplicas,
//     ready, selector, dataAside, peerUrlTLSEnabled, clusterSize and the conditions Ready, AllMembersReady,
//     AllMembersUpdated, TLSEnabled and the backup conditions (BackupReady,
//     FullSnapshotBackupReady, DeltaSnapshotBackupReady);
//   - WriterMembership (the membership controller): clusterID, voters and the conditions
//     ScaleOperationInProgress and MemberRestart;
//   - WriterDefrag (the defragmentation controller): the condition DefragmentationInProgress;
//   - WriterRecovery (the recovery controller): recovery, the conditions RecoveryInProgress and
//     RestoreIncomplete, and
//     clusterID and voters too: the membership controller records them while the recorded
//     cluster is quorate, the recovery controller once more when a restore from backup has made
//     a new cluster. The two never write them for the same cluster at the same time (the
//     membership controller records voters only from a leader of the recorded cluster, and the
//     cluster ID only while it is empty), and each write is a merge patch of those fields.
type Writer string

const (
	WriterEtcd       Writer = "etcd"
	WriterOnDelete   Writer = "ondelete"
	WriterStatus     Writer = "status"
	WriterMembership Writer = "membership"
	WriterRecovery   Writer = "recovery"
	WriterDefrag     Writer = "defrag"
)

// conditionOwners names the writer of each condition type.
var conditionOwners = map[druidv1alpha1.ConditionType]Writer{
	druidv1alpha1.ConditionTypeReady:                           WriterStatus,
	druidv1alpha1.ConditionTypeAllMembersReady:                 WriterStatus,
	druidv1alpha1.ConditionTypeAllMembersUpdated:               WriterStatus,
	druidv1alpha1.ConditionTypeBackupReady:                     WriterStatus,
	druidv1alpha1.ConditionTypeFullSnapshotBackupReady:         WriterStatus,
	druidv1alpha1.ConditionTypeDeltaSnapshotBackupReady:        WriterStatus,
	druidv1alpha1.ConditionTypeTLSEnabled:                      WriterStatus,
	druidv1alpha1.ConditionTypeBootstrappedWithExistingCluster: WriterStatus,
	druidv1alpha1.ConditionTypeScaleOperationInProgress:        WriterMembership,
	druidv1alpha1.ConditionTypeMemberRestart:                   WriterMembership,
	druidv1alpha1.ConditionTypeRecoveryInProgress:              WriterRecovery,
	druidv1alpha1.ConditionTypeRestoreIncomplete:               WriterRecovery,
	druidv1alpha1.ConditionTypeDefragmentationInProgress:       WriterDefrag,
	druidv1alpha1.ConditionTypeUpdateStrategyHeld:              WriterEtcd,
	druidv1alpha1.ConditionTypeVersionChange:                   WriterEtcd,
	druidv1alpha1.ConditionTypeVolumeChange:                    WriterEtcd,
	druidv1alpha1.ConditionTypeTrustChange:                     WriterEtcd,
}

// OwnsCondition tells whether w writes conditions of type t.
func (w Writer) OwnsCondition(t druidv1alpha1.ConditionType) bool {
	return conditionOwners[t] == w
}

// withoutOwned clears, in a copy of s, the fields w owns; what is left must not change in a write.
func (w Writer) withoutOwned(s druidv1alpha1.EtcdStatus) (druidv1alpha1.EtcdStatus, error) {
	switch w {
	case WriterEtcd:
		s.ObservedGeneration, s.LastErrors = nil, nil
	case WriterOnDelete:
		s.LastOperation = nil
	case WriterStatus:
		s.Members, s.Replicas, s.ReadyReplicas, s.CurrentReplicas, s.Ready, s.Selector, s.DataAside = nil, 0, 0, 0, nil, nil, nil
		s.PeerUrlTLSEnabled, s.ClusterSize = nil, nil
	case WriterMembership:
		s.ClusterID, s.Voters = "", nil
	case WriterRecovery:
		s.ClusterID, s.Voters, s.Recovery = "", nil, nil
	case WriterDefrag:
		// DefragmentationInProgress alone, a condition.
	default:
		return s, fmt.Errorf("unknown Etcd status writer %q", w)
	}
	var others []druidv1alpha1.Condition
	for _, c := range s.Conditions {
		if !w.OwnsCondition(c.Type) {
			others = append(others, c)
		}
	}
	s.Conditions = others
	return s, nil
}

// Patch sets, through set, the status fields w owns on etcd and writes them with one merge
// patch, only when something changed: a reconcile that finds the status as it should be sends
// nothing (set must keep times of what did not change, see StampConditions). A set that touches a
// field or condition w does not own is a programming error and is refused before anything is
// written.
//
// A merge patch replaces the whole conditions list, which several writers share: when the patch
// carries the list it is sent with the resourceVersion it was computed on (optimistic lock), so
// a condition another writer added meanwhile is never dropped; the conflict is returned and the
// reconcile retries on fresh state.
func Patch(ctx context.Context, c client.Client, etcd *druidv1alpha1.Etcd, w Writer, set func(*druidv1alpha1.EtcdStatus)) error {
	before := etcd.DeepCopy()
	set(&etcd.Status)
	othersBefore, err := w.withoutOwned(before.Status)
	if err != nil {
		return err
	}
	othersAfter, _ := w.withoutOwned(etcd.Status)
	if !equality.Semantic.DeepEqual(othersBefore, othersAfter) {
		etcd.Status = before.Status
		return fmt.Errorf("the %s controller changed Etcd status fields it does not own", w)
	}
	if equality.Semantic.DeepEqual(before.Status, etcd.Status) {
		// The common case (a settled cluster), decided without marshalling both versions.
		return nil
	}
	patch := client.MergeFrom(before)
	if data, err := patch.Data(etcd); err == nil && string(data) == "{}" {
		// Nothing changed (nil and empty lists marshal alike, so compare what would be sent).
		return nil
	}
	// The recovery order, the recorded voters and the recorded cluster ID are decisions about
	// the cluster as it was read: they are written only onto the version they were decided on,
	// like the shared conditions.
	if !equality.Semantic.DeepEqual(before.Status.Conditions, etcd.Status.Conditions) ||
		!equality.Semantic.DeepEqual(before.Status.Recovery, etcd.Status.Recovery) ||
		!equality.Semantic.DeepEqual(before.Status.Voters, etcd.Status.Voters) ||
		before.Status.ClusterID != etcd.Status.ClusterID {
		patch = client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	}
	if err := c.Status().Patch(ctx, etcd, patch); err != nil {
		return fmt.Errorf("patching status of Etcd %s/%s: %w", etcd.Namespace, etcd.Name, err)
	}
	return nil
}
