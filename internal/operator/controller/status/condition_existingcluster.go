package status

import (
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

const (
	// ReasonJoinNotSupported: the Etcd asks to join an existing cluster and its members are held
	// back (resources.ExistingClusterNotJoined).
	ReasonJoinNotSupported = "JoinNotSupported"
	// ReasonRunsOnItsOwn: the Etcd asks to join an existing cluster, but its members ran before it
	// did and form a cluster of their own.
	ReasonRunsOnItsOwn = "MembersRunOnTheirOwn"
)

// existingClusterCondition is etcd-druid's BootstrappedWithExistingCluster, present only when the
// Etcd sets spec.etcd.bootstrapWithExistingCluster. It is never True here: nothing joins another
// cluster yet.
func existingClusterCondition(o Inputs) (druidv1alpha1.Condition, bool) {
	why := resources.ExistingClusterNotJoined(o.Etcd)
	if why == "" {
		return druidv1alpha1.Condition{}, false
	}
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeBootstrappedWithExistingCluster, Status: druidv1alpha1.ConditionFalse,
		Reason: ReasonJoinNotSupported, Message: why}
	if o.StatefulSet != nil {
		c.Reason = ReasonRunsOnItsOwn
		c.Message = "the members were started before spec.etcd.bootstrapWithExistingCluster was set and form a cluster of their own; they never joined the source cluster"
	}
	return c, true
}
