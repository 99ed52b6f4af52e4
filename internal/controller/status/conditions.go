package status

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// Every condition the status controller writes is computed by one function in its own file,
// condition_<type>.go, from the observation alone; setConditions is the one place that merges
// them into the previous list.

// setConditions returns conds in order, stamped with now, except that a condition whose status
// did not change keeps its lastTransitionTime, and one that did not change at all keeps its
// lastUpdateTime too, so recomputing writes nothing and does not wake the controllers that watch
// the Etcd.
func setConditions(prev []druidv1alpha1.Condition, now metav1.Time, conds ...druidv1alpha1.Condition) []druidv1alpha1.Condition {
	for i := range conds {
		conds[i].LastUpdateTime = now
		conds[i].LastTransitionTime = now
		old := druidv1alpha1.FindCondition(prev, conds[i].Type)
		if old == nil || old.Status != conds[i].Status {
			continue
		}
		conds[i].LastTransitionTime = old.LastTransitionTime
		if old.Reason == conds[i].Reason && old.Message == conds[i].Message {
			conds[i].LastUpdateTime = old.LastUpdateTime
		}
	}
	return conds
}
