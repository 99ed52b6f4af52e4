package status

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// Health is what the per-Etcd and per-member gauges show (Metrics.record): one Etcd's status as
// this controller computed it, with the conditions other controllers own as last read.
type Health struct {
	// Ready is status.ready; Quorate is the Ready condition (a quorum of the voters is ready).
	Ready, Quorate bool
	SpecReplicas   int32
	// ReadyMembers counts the members whose status is Ready; Voters is status.clusterSize.
	ReadyMembers, Voters int32
	// QuotaBytes is each member's backend quota (spec.etcd.quota or the default).
	QuotaBytes int64
	// Conditions is every condition of the status after this controller's write: its own as
	// computed, the others' (ScaleOperationInProgress, RecoveryInProgress, ...) as read.
	Conditions []druidv1alpha1.Condition
	Members    []MemberHealth
	// LastFullSnapshot and LastDeltaSnapshot are when the snapshot Leases say the last snapshot
	// was uploaded; zero when there is none (or no backups).
	LastFullSnapshot, LastDeltaSnapshot time.Time
}

// MemberHealth is one member's line of status.members.
type MemberHealth struct {
	Name          string
	Ready, Leader bool
}

// HealthOf is the Health of o.Etcd once computed (Compute's result) is written. It is pure.
func HealthOf(o Inputs, computed druidv1alpha1.EtcdStatus) Health {
	h := Health{
		Ready:        ptr.Deref(computed.Ready, false),
		SpecReplicas: o.Etcd.Spec.Replicas,
		Voters:       ptr.Deref(computed.ClusterSize, 0),
		QuotaBytes:   resources.Quota(o.Etcd),
		Conditions:   mergedConditions(o.Etcd.Status.Conditions, computed.Conditions),
	}
	if c := druidv1alpha1.FindCondition(computed.Conditions, druidv1alpha1.ConditionTypeReady); c != nil {
		h.Quorate = c.Status == druidv1alpha1.ConditionTrue
	}
	for _, m := range computed.Members {
		ready := m.Status == druidv1alpha1.EtcdMemberStatusReady
		if ready {
			h.ReadyMembers++
		}
		h.Members = append(h.Members, MemberHealth{Name: m.Name, Ready: ready, Leader: ptr.Deref(m.Role, "") == druidv1alpha1.EtcdRoleLeader})
	}
	h.LastFullSnapshot = lastSnapshot(o.FullSnapshotLease)
	h.LastDeltaSnapshot = lastSnapshot(o.DeltaSnapshotLease)
	return h
}

// mergedConditions is what Reconcile's patch leaves: the computed conditions, and those of the
// previous list this controller does not own, in the previous order.
func mergedConditions(previous, computed []druidv1alpha1.Condition) []druidv1alpha1.Condition {
	out := append([]druidv1alpha1.Condition(nil), computed...)
	for _, c := range previous {
		if !etcdstatus.WriterStatus.OwnsCondition(c.Type) && druidv1alpha1.FindCondition(computed, c.Type) == nil {
			out = append(out, c)
		}
	}
	return out
}

// lastSnapshot is when a snapshot Lease says its last snapshot was uploaded (describeLast's
// rule: a time and a revision), zero without one.
func lastSnapshot(lease *coordinationv1.Lease) time.Time {
	if lease == nil {
		return time.Time{}
	}
	rec := memberlease.ParseSnapshotLease(lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Annotations)
	if rec.Time.IsZero() || !rec.HasRevision {
		return time.Time{}
	}
	return rec.Time
}
