package specgate

import (
	"fmt"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// etcd-druid's annotations on an Etcd.
const (
	// AnnotationOperation with OperationReconcile orders the spec applied once; the reconciler
	// removes it when it has. AnnotationGardenerOperation is Gardener's name for the same order,
	// which etcd-druid honours too (a Gardener shoot's Etcds are annotated with it).
	AnnotationOperation         = "druid.gardener.cloud/operation"
	AnnotationGardenerOperation = "gardener.cloud/operation"
	OperationReconcile          = "reconcile"
	// AnnotationSuspend (any value) stops the spec being applied until it is removed.
	AnnotationSuspend = "druid.gardener.cloud/suspend-etcd-spec-reconcile"
	// AnnotationIgnoreReconciliation is AnnotationSuspend's older name (etcd-druid dropped it in
	// v0.27): still honoured, since an Etcd written for an older etcd-druid may carry it.
	AnnotationIgnoreReconciliation = "druid.gardener.cloud/ignore-reconciliation"
)

// Rule ids.
const (
	RuleSuspended       ruleid.ID = "spec/suspended"
	RuleAuto            ruleid.ID = "spec/auto-reconcile"
	RuleOrdered         ruleid.ID = "spec/reconcile-ordered"
	RuleFirst           ruleid.ID = "spec/first-reconcile"
	RuleNothingPending  ruleid.ID = "spec/nothing-pending"
	RuleWaitForOrdering ruleid.ID = "spec/wait-reconcile-annotation"
)

// Decision says whether to apply the spec.
type Decision struct {
	Apply  bool
	Rule   ruleid.ID
	Reason string
	// ConsumeOrder: the operation annotation ordered this pass; remove it once applied.
	ConsumeOrder bool
}

// OrderAnnotations are the annotations of etcd that order its spec applied (either name, value
// reconcile): what the reconciler removes once it has.
func OrderAnnotations(etcd *druidv1alpha1.Etcd) []string {
	var out []string
	for _, a := range []string{AnnotationOperation, AnnotationGardenerOperation} {
		if etcd.Annotations[a] == OperationReconcile {
			out = append(out, a)
		}
	}
	return out
}

// Decide applies, in order: a suspended Etcd is left as it is; with auto-reconcile every spec is
// applied; otherwise the spec is applied when the operation annotation orders it, when the Etcd
// was never reconciled (it must come up), and when nothing is pending (a resync of the spec already
// applied restores what was changed behind the operator's back); a changed spec waits for the
// order.
func Decide(etcd *druidv1alpha1.Etcd, autoReconcile bool) Decision {
	for _, a := range []string{AnnotationSuspend, AnnotationIgnoreReconciliation} {
		if _, ok := etcd.Annotations[a]; ok {
			return Decision{Rule: RuleSuspended, Reason: fmt.Sprintf("annotation %s is set: the spec is not applied until it is removed", a)}
		}
	}
	ordered := len(OrderAnnotations(etcd)) > 0
	observed := etcd.Status.ObservedGeneration
	switch {
	case autoReconcile:
		return Decision{Apply: true, Rule: RuleAuto, Reason: "every spec change is applied (enableEtcdSpecAutoReconcile)", ConsumeOrder: ordered}
	case ordered:
		return Decision{Apply: true, Rule: RuleOrdered, ConsumeOrder: true,
			Reason: fmt.Sprintf("annotation %s=%s orders generation %d applied", AnnotationOperation, OperationReconcile, etcd.Generation)}
	case observed == nil:
		return Decision{Apply: true, Rule: RuleFirst, Reason: "never reconciled: the Etcd is brought up"}
	case *observed == etcd.Generation:
		return Decision{Apply: true, Rule: RuleNothingPending, Reason: fmt.Sprintf("generation %d is the one applied", etcd.Generation)}
	}
	return Decision{Rule: RuleWaitForOrdering, Reason: fmt.Sprintf(
		"generation %d waits for annotation %s=%s (enableEtcdSpecAutoReconcile is false); the objects stay at generation %d",
		etcd.Generation, AnnotationOperation, OperationReconcile, *observed)}
}
