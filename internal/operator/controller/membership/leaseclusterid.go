package membership

import (
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// leaseClusterID is the cluster ID (hex) that a majority of spec.replicas' member Leases report
// in their holderIdentity ("<memberID>:<clusterID>:<role>", written by each member's sidecar
// only while its etcd answers it), with the names of those Leases; "" when there is no such
// majority. It is how the cluster ID is recorded when the operator has no network path to the
// members (issue 24, item 5): until it is recorded the ConfigMap says "new", and a member pod
// whose data dir is empty and that finds no leader would bootstrap a new cluster under its old
// identity.
//
// A Lease counts only when the Etcd controls it, it is the Lease of one of spec.replicas'
// members, and it was renewed within its leaseDurationSeconds (a renewal stamped more than one
// lease duration ahead of now is not believed). Pure.
//
// Member pods and namespace users can write these Leases, so it matters what recording can do:
// it only ever stops a bootstrap, never causes a destructive action. The recorded ID turns
// ETCD_INITIAL_CLUSTER_STATE to "existing" (a member without data then waits for a leader
// instead of starting a new cluster), makes the membership planner wait instead of sizing the
// StatefulSet straight to spec.replicas, and lets the recovery controller look; but recovery
// orders nothing without status.voters, which are recorded only from a member that answers the
// operator over mTLS as leader of the recorded cluster. A forged ID therefore costs at worst a
// wait for a person (no bootstrap, no automatic recovery), never data.
func leaseClusterID(etcd *druidv1alpha1.Etcd, leases []coordinationv1.Lease, now time.Time) (string, []string) {
	replicas := int(etcd.Spec.Replicas)
	if replicas <= 0 || resources.ValidateReplicas(etcd.Spec.Replicas) != nil {
		return "", nil
	}
	members := map[string]bool{}
	for _, name := range resources.MemberLeaseNames(etcd) {
		members[name] = true
	}
	reporters := map[string][]string{}
	for _, l := range resources.ControlledLeases(etcd, leases) {
		if !members[l.Name] || !renewedWithinDuration(&l, now) || l.Spec.HolderIdentity == nil {
			continue
		}
		_, cluster, _, ok := roles.ParseHolderIdentity(*l.Spec.HolderIdentity)
		if !ok || cluster == "" {
			continue
		}
		id, err := strconv.ParseUint(cluster, 16, 64)
		if err != nil || id == 0 {
			continue
		}
		key := strconv.FormatUint(id, 16)
		reporters[key] = append(reporters[key], l.Name)
	}
	for id, names := range reporters {
		if len(names) >= quorum.Of(replicas) {
			slices.Sort(names)
			return id, names
		}
	}
	return "", nil
}

// renewedWithinDuration: the Lease was renewed no longer than its leaseDurationSeconds ago, and
// not more than that ahead of now (clocks differ a little, not by a lease duration).
func renewedWithinDuration(l *coordinationv1.Lease, now time.Time) bool {
	expiry, renewed := roles.LeaseExpiry(l)
	if !renewed || *l.Spec.LeaseDurationSeconds <= 0 {
		return false
	}
	d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	return now.Before(expiry) && !l.Spec.RenewTime.Time.After(now.Add(d))
}
