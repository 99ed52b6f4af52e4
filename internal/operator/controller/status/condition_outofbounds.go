package status

import (
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// outOfBoundsConditions are the conditions of an Etcd whose spec.replicas or member pods exceed
// MaxReplicas, in the order Compute expects (Ready first, AllMembersReady second).
func outOfBoundsConditions(reason, message string) []druidv1alpha1.Condition {
	return []druidv1alpha1.Condition{
		{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionFalse, Reason: reason, Message: message},
		{Type: druidv1alpha1.ConditionTypeAllMembersReady, Status: druidv1alpha1.ConditionUnknown, Reason: reason, Message: message},
		{Type: druidv1alpha1.ConditionTypeAllMembersUpdated, Status: druidv1alpha1.ConditionUnknown, Reason: reason, Message: message},
	}
}
