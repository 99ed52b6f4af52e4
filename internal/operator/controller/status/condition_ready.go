package status

import (
	"fmt"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
)

// readyCondition is True while at least a quorum (voters/2+1) of the voting members is ready.
// voters excludes learners and ordinals a scale-out has not added yet; see Compute.
func readyCondition(specReplicas, voters, readyVoters int) druidv1alpha1.Condition {
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeReady}
	q := quorum.Of(voters)
	switch {
	case specReplicas == 0:
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionFalse, ReasonNoMembers, "spec.replicas is 0"
	case voters == 0:
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionFalse, ReasonNoMembers, "no voting member has a pod yet"
	case readyVoters >= q:
		c.Status, c.Reason = druidv1alpha1.ConditionTrue, ReasonQuorate
		c.Message = fmt.Sprintf("%d/%d members ready, quorum is %d", readyVoters, voters, q)
	default:
		c.Status, c.Reason = druidv1alpha1.ConditionFalse, etcdstatus.ReasonQuorumLost
		c.Message = fmt.Sprintf("%d/%d members ready, quorum needs %d", readyVoters, voters, q)
	}
	return c
}
