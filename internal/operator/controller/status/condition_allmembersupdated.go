package status

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// allMembersUpdatedCondition compares each member pod's controller-revision-hash with the
// StatefulSet's update revision. While a rollout is under way under OnDelete, the condition
// carries the ondelete controller's current decision (from status.lastOperation): its rule as the
// Reason, in CamelCase (e.g. WaitUpdatedNotParticipating, ParticipatingFollower), so
// `kubectl wait` and alerts can key on what holds the rollout, and its description in the
// message. Without such a decision (RollingUpdate, or none recorded for this revision yet) the
// Reason is NotAllMembersUpdated.
func allMembersUpdatedCondition(o Inputs, updateRevision string, op *druidv1alpha1.LastOperation) druidv1alpha1.Condition {
	c := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeAllMembersUpdated}
	if o.StatefulSet == nil {
		c.Status, c.Reason, c.Message = druidv1alpha1.ConditionUnknown, ReasonStatefulSetMissing, "the StatefulSet does not exist yet"
		return c
	}
	sts := o.StatefulSet
	var outdated []string
	updated := 0
	names := resources.PodNames(o.Etcd)
	for _, name := range names {
		pod := resources.FindPod(o.Pods, name)
		if pod == nil || updateRevision == "" || pod.Labels[appsv1.StatefulSetRevisionLabel] != updateRevision || !pod.DeletionTimestamp.IsZero() {
			outdated = append(outdated, name)
			continue
		}
		updated++
	}
	sort.Strings(outdated)
	stsCaughtUp := sts.Status.ObservedGeneration >= sts.Generation
	if len(outdated) == 0 && stsCaughtUp {
		c.Status, c.Reason = druidv1alpha1.ConditionTrue, ReasonAllMembersUpdated
		c.Message = fmt.Sprintf("all %d members run revision %s", len(names), updateRevision)
		return c
	}
	c.Status, c.Reason = druidv1alpha1.ConditionFalse, ReasonNotAllMembersUpdated
	c.Message = fmt.Sprintf("%d/%d members at revision %s; outdated: %s", updated, len(names), updateRevision, strings.Join(outdated, ", "))
	if !stsCaughtUp {
		c.Message = "the StatefulSet controller has not observed the latest spec yet"
	}
	if sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		return c
	}
	if hold := druidv1alpha1.FindCondition(o.Etcd.Status.Conditions, druidv1alpha1.ConditionTypeUpdateStrategyHeld); hold != nil && hold.Status == druidv1alpha1.ConditionTrue {
		// The gate is off: the OnDelete controller starts no step, so its last decision is stale.
		c.Reason = ReasonUpdateStrategyHeld
		c.Message += "; " + hold.Message
		return c
	}
	if op != nil && op.Type == etcdstatus.OperationRollout && op.RunID == updateRevision && op.Description != "" {
		c.Message += "; " + op.Description
	}
	// A recorded "done" while pods are still outdated is stale: the rollout has not started over
	// yet, and no rule holds it.
	if rule, ok := etcdstatus.RolloutRule(op, updateRevision); ok && rule != rollout.RuleDone {
		c.Reason = rule.CamelCase()
	}
	return c
}
