package etcdstatus

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
)

// OperationRollout is the lastOperation type the ondelete controller writes.
const OperationRollout = "Rollout"

// lastOperation states of a rollout.
const (
	OperationProcessing = "Processing"
	OperationSucceeded  = "Succeeded"
)

// RolloutOperation is the lastOperation recording one OnDelete decision for updateRevision. Its
// description is "<reason> [<rule id>]" and, when roles mattered, how they were learned;
// RolloutRule reads the rule back, so the AllMembersUpdated condition can carry it as Reason.
// rolesDecided says whether the decision depended on roles.
func RolloutOperation(d rollout.Decision, res roles.Resolution, rolesDecided bool, updateRevision string, now metav1.Time) druidv1alpha1.LastOperation {
	description := fmt.Sprintf("%s [%s]", d.Reason, d.Rule)
	switch {
	case res.Source == roles.SourceDirect && d.Action == rollout.ActionDelete:
		description += " (roles: direct)"
	case res.Source != roles.SourceDirect && rolesDecided:
		description += fmt.Sprintf(" (roles: %s: %s)", res.Source, res.Detail)
	}
	state := OperationProcessing
	if d.Action == rollout.ActionDone {
		state = OperationSucceeded
	}
	return druidv1alpha1.LastOperation{
		Type:           OperationRollout,
		State:          state,
		Description:    description,
		RunID:          updateRevision,
		LastUpdateTime: now,
	}
}

// SameRolloutOperation tells whether two rollout records say the same; their times may differ.
func SameRolloutOperation(a *druidv1alpha1.LastOperation, b druidv1alpha1.LastOperation) bool {
	return a != nil && a.Type == b.Type && a.RunID == b.RunID && a.Description == b.Description && a.State == b.State
}

// RolloutRule returns the rule of the OnDelete decision recorded in op for updateRevision, and
// false when op records no such decision (another operation, an older revision, or a
// description not written by RolloutOperation).
func RolloutRule(op *druidv1alpha1.LastOperation, updateRevision string) (rollout.RuleID, bool) {
	if op == nil || op.Type != OperationRollout || op.RunID != updateRevision || updateRevision == "" {
		return "", false
	}
	// The reason never holds " [", the rule id never holds "]".
	_, rest, ok := strings.Cut(op.Description, " [")
	if !ok {
		return "", false
	}
	rule, _, ok := strings.Cut(rest, "]")
	if !ok || rule == "" || strings.Trim(rule, "abcdefghijklmnopqrstuvwxyz0123456789/-") != "" {
		return "", false
	}
	return rollout.RuleID(rule), true
}
