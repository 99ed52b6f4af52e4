package operation

import (
	"fmt"
	"slices"
	"strings"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/versionchange"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/volumechange"
)

// Kind names an operation. It becomes part of rule ids (<planner>/wait/operation-in-flight/<kind>), so it
// is stable.
type Kind string

const (
	KindRollout         Kind = "rollout"
	KindScale           Kind = "scale"
	KindRecovery        Kind = "recovery"
	KindDefragmentation Kind = "defragmentation"
	KindStrategyHold    Kind = "strategy-hold"
	KindVersionChange   Kind = "version-change"
	KindVolumeChange    Kind = "volume-change"
)

// Hold ties a status condition to the operation it marks and the controller that holds it.
type Hold struct {
	Condition druidv1alpha1.ConditionType
	Kind      Kind
	Holder    string
	// Steps, when set, are the rules under which the True condition marks the operation in
	// flight (by its reason, the rule's CamelCase): a change refused, or waiting on what the
	// others may have to do first (every member ready, every member's word), holds nobody.
	Steps []ruleid.ID
	// CarriedOutBy are the operations that carry this one out and so never wait on it: the
	// rollout replaces the members for a version or volume change, and for a volume change the
	// membership controller adds each replaced member back as a learner (its data is on the old
	// claims).
	CarriedOutBy []Kind
}

// Holds are the conditions that mark an operation in flight. Adding one here is all it takes for
// every planner to wait on it (and for `plan`, the Events and the wait metrics to name it).
var Holds = []Hold{
	{Condition: druidv1alpha1.ConditionTypeScaleOperationInProgress, Kind: KindScale, Holder: "membership controller"},
	{Condition: druidv1alpha1.ConditionTypeRecoveryInProgress, Kind: KindRecovery, Holder: "recovery controller"},
	{Condition: druidv1alpha1.ConditionTypeDefragmentationInProgress, Kind: KindDefragmentation, Holder: "defragmentation controller"},
	{Condition: druidv1alpha1.ConditionTypeUpdateStrategyHeld, Kind: KindStrategyHold, Holder: "Etcd reconciler"},
	{Condition: druidv1alpha1.ConditionTypeVersionChange, Kind: KindVersionChange, Holder: "Etcd reconciler",
		Steps: versionchange.UnderWay, CarriedOutBy: []Kind{KindRollout}},
	{Condition: druidv1alpha1.ConditionTypeVolumeChange, Kind: KindVolumeChange, Holder: "Etcd reconciler",
		Steps: volumechange.UnderWay, CarriedOutBy: []Kind{KindRollout, KindScale}},
}

// InFlight is one operation under way.
type InFlight struct {
	Kind      Kind                        `json:"kind"`
	Condition druidv1alpha1.ConditionType `json:"condition,omitempty"`
	Holder    string                      `json:"holder,omitempty"`
	// Step is the condition's reason: the step the holder is on.
	Step string `json:"step,omitempty"`
	// Detail is the condition's message.
	Detail string `json:"detail,omitempty"`
	// CarriedOutBy is Hold.CarriedOutBy.
	CarriedOutBy []Kind `json:"carriedOutBy,omitempty"`
}

// Describe is one line for a wait's reason.
func (f InFlight) Describe() string {
	s := fmt.Sprintf("%s (%s True, held by the %s", f.Kind, f.Condition, f.Holder)
	if f.Step != "" {
		s += ", step " + f.Step
	}
	s += ")"
	if f.Detail != "" {
		s += ": " + f.Detail
	}
	return s
}

// Set is the operations in flight on one Etcd, in the order of Holds.
type Set []InFlight

// In returns the operations whose condition is True in conds.
func In(conds []druidv1alpha1.Condition) Set {
	var out Set
	for _, h := range Holds {
		c := druidv1alpha1.FindCondition(conds, h.Condition)
		if c == nil || c.Status != druidv1alpha1.ConditionTrue || !h.underWay(c.Reason) {
			continue
		}
		out = append(out, InFlight{Kind: h.Kind, Condition: h.Condition, Holder: h.Holder, Step: c.Reason, Detail: c.Message,
			CarriedOutBy: h.CarriedOutBy})
	}
	return out
}

// underWay tells whether a True condition with reason marks the operation in flight.
func (h Hold) underWay(reason string) bool {
	return h.Steps == nil || slices.ContainsFunc(h.Steps, func(r ruleid.ID) bool { return r.CamelCase() == reason })
}

// Of returns the operations in flight on etcd; none for a nil Etcd (a saved state without one).
func Of(etcd *druidv1alpha1.Etcd) Set {
	if etcd == nil {
		return nil
	}
	return In(etcd.Status.Conditions)
}

// Except returns s without the operations of kind k and those k carries out: a controller never
// waits on itself.
func (s Set) Except(k Kind) Set {
	return slices.DeleteFunc(slices.Clone(s), func(f InFlight) bool { return f.Kind == k || slices.Contains(f.CarriedOutBy, k) })
}

// Has tells whether an operation of kind k is in flight.
func (s Set) Has(k Kind) bool {
	return slices.ContainsFunc(s, func(f InFlight) bool { return f.Kind == k })
}

// Describe joins the operations' descriptions.
func (s Set) Describe() string {
	parts := make([]string, len(s))
	for i, f := range s {
		parts[i] = f.Describe()
	}
	return strings.Join(parts, "; ")
}

// WaitRule is the rule id of planner's wait on operation kind k, spelled alike in every planner
// and qualified by it: <planner>/wait/operation-in-flight/<kind>.
func WaitRule(planner string, k Kind) ruleid.ID {
	return ruleid.ID(planner + "/" + waitRuleInfix + string(k))
}

const waitRuleInfix = "wait/operation-in-flight/"

// IsWaitRule tells whether id is a wait on another operation (WaitRule): such a wait is not a
// step of the waiting controller's own operation.
func IsWaitRule(id ruleid.ID) bool { return strings.Contains(string(id), "/"+waitRuleInfix) }

// Pod is what RolloutInFlight needs of a member pod.
type Pod struct {
	Revision    string
	Terminating bool
}

// RolloutInFlight is the one definition of a rollout under way: a member pod is terminating, or
// is not at the StatefulSet's update revision. Without an update revision (the StatefulSet
// controller has not reported one yet) no pod is outdated, as the rollout planner sees it too. A
// pod still missing is not a rollout: a scale-out creates pods too.
func RolloutInFlight(updateRevision string, pods []Pod) bool {
	return slices.ContainsFunc(pods, func(p Pod) bool {
		return p.Terminating || (updateRevision != "" && p.Revision != updateRevision)
	})
}
