package etcd

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/compat"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
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

// EventReasonStorageChangeIgnored marks the Event saying a storage change cannot reach the members.
const EventReasonStorageChangeIgnored = "StorageChangeIgnored"

// reportStorageDrift says, once per spec generation, that a changed storageCapacity or
// storageClass does not reach the members: the StatefulSet's claim templates are immutable.
func (r *Reconciler) reportStorageDrift(ctx context.Context, etcd *druidv1alpha1.Etcd, existing, desired []corev1.PersistentVolumeClaim) {
	if generationReported(etcd) {
		return
	}
	drift := resources.VolumeClaimDrift(existing, desired)
	if len(drift) == 0 {
		return
	}
	msg := fmt.Sprintf("not applied: %s; volume claim templates cannot change after the StatefulSet is created (resize the data-<member> PersistentVolumeClaims if their storage class allows expansion)",
		strings.Join(drift, ", "))
	logr.FromContextOrDiscard(ctx).Info("Storage change cannot reach the members", "drift", drift)
	r.recorder.Event(etcd, corev1.EventTypeWarning, EventReasonStorageChangeIgnored, msg)
}
