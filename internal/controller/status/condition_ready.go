package status

import (
	"fmt"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// readyCondition is True while at least a quorum (replicas/2+1) of the members is ready.
func readyCondition(replicas, readyMembers int) druidv1alpha1.Condition {
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeReady}
	quorum := replicas/2 + 1
	switch {
	case replicas == 0:
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionFalse, ReasonNoMembers, "spec.replicas is 0"
	case readyMembers >= quorum:
		c.Status, c.Reason = druidv1alpha1.ConditionTrue, ReasonQuorate
		c.Message = fmt.Sprintf("%d/%d members ready, quorum is %d", readyMembers, replicas, quorum)
	default:
		c.Status, c.Reason = druidv1alpha1.ConditionFalse, ReasonQuorumLost
		c.Message = fmt.Sprintf("%d/%d members ready, quorum needs %d", readyMembers, replicas, quorum)
	}
	return c
}
