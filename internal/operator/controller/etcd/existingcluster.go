package etcd

import (
	"context"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// EventReasonExistingClusterNotJoined marks the Warning that an Etcd asking to join an existing
// cluster gets no members (resources.ExistingClusterNotJoined).
const EventReasonExistingClusterNotJoined = "ExistingClusterNotJoined"

// holdsMembersBack tells whether the member StatefulSet is not to be created: the Etcd asks to
// join an existing cluster and has no members yet. A StatefulSet that exists (created before
// the field was set, which the CRD forbids but older objects may carry) is reconciled as usual:
// its members already run, and holding them back would stop nothing that is safer stopped.
func (r *Reconciler) holdsMembersBack(ctx context.Context, etcd *druidv1alpha1.Etcd, o *observation) bool {
	why := resources.ExistingClusterNotJoined(etcd)
	if why == "" || o.stsExists {
		return false
	}
	if !generationReported(etcd) {
		logr.FromContextOrDiscard(ctx).Info("Not starting the members of an Etcd that asks to join an existing cluster", "reason", why)
		r.recorder.Event(etcd, corev1.EventTypeWarning, EventReasonExistingClusterNotJoined, why)
	}
	return true
}
