package status

import (
	"fmt"
	"strings"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// allMembersReadyCondition is True while every member is ready; the message names the others.
func allMembersReadyCondition(members []druidv1alpha1.EtcdMemberStatus) druidv1alpha1.Condition {
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeAllMembersReady}
	var notReady []string
	for _, m := range members {
		if m.Status != druidv1alpha1.EtcdMemberStatusReady {
			notReady = append(notReady, fmt.Sprintf("%s (%s)", m.Name, m.Reason))
		}
	}
	if len(notReady) == 0 && len(members) > 0 {
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionTrue, ReasonAllMembersReady, "all members are ready"
		return c
	}
	c.Status, c.Reason = druidv1alpha1.ConditionFalse, ReasonNotAllMembersReady
	c.Message = "not ready: " + strings.Join(notReady, ", ")
	if len(members) == 0 {
		c.Message = "no members"
	}
	return c
}
