package etcd

import (
	"context"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/compat"
)

// generationReported: this spec generation was applied before, so what is said once per
// generation (the Events below) was said.
func generationReported(etcd *druidv1alpha1.Etcd) bool {
	g := etcd.Status.ObservedGeneration
	return g != nil && *g == etcd.Generation
}

// EventReasonFieldsIgnored marks the Event that lists the etcd-druid fields an Etcd sets that the
// operator accepts but does not act on.
const EventReasonFieldsIgnored = "FieldsIgnored"

// reportIgnoredFields says once per spec generation which set fields have no effect, so an
// etcd-druid user learns it from kubectl describe rather than from a backup that never happens.
func (r *Reconciler) reportIgnoredFields(ctx context.Context, etcd *druidv1alpha1.Etcd) {
	if generationReported(etcd) {
		return
	}
	fields := compat.Ignored(&etcd.Spec)
	if len(fields) == 0 {
		return
	}
	summary := compat.Summary(fields)
	logr.FromContextOrDiscard(ctx).Info("Etcd sets fields the operator ignores", "fields", len(fields), "summary", summary)
	r.recorder.Event(etcd, corev1.EventTypeNormal, EventReasonFieldsIgnored, summary)
}
