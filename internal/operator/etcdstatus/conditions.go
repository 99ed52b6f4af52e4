package etcdstatus

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// StampConditions returns conds in order, stamped with now, except that a condition whose status
// did not change keeps its lastTransitionTime, and one that did not change at all keeps its
// lastUpdateTime too, so recomputing writes nothing and does not wake the controllers that watch
// the Etcd.
func StampConditions(prev []druidv1alpha1.Condition, now metav1.Time, conds ...druidv1alpha1.Condition) []druidv1alpha1.Condition {
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

// SetCondition puts cond into conds in place of the condition of its type, or appends it,
// keeping its lastTransitionTime while its status stays and its lastUpdateTime while nothing of
// it changes, so writing the same condition again changes nothing.
func SetCondition(conds []druidv1alpha1.Condition, cond druidv1alpha1.Condition) []druidv1alpha1.Condition {
	merged := StampConditions(conds, cond.LastUpdateTime, cond)[0]
	out := make([]druidv1alpha1.Condition, 0, len(conds)+1)
	replaced := false
	for _, c := range conds {
		if c.Type == cond.Type {
			out = append(out, merged)
			replaced = true
			continue
		}
		out = append(out, c)
	}
	if !replaced {
		out = append(out, merged)
	}
	return out
}
