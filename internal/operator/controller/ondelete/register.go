package ondelete

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/priority"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "ondelete"

// RegisterWithManager wires the controller. It is always registered; its predicate lets through
// only StatefulSets owned by an Etcd with updateStrategy OnDelete, so under RollingUpdate it is
// inert. It reconciles when a StatefulSet's update revision or strategy changes and whenever one of
// its pods changes (a pod becoming ready is what lets a waiting rollout go on).
func (r *Reconciler) RegisterWithManager(mgr ctrl.Manager, concurrentSyncs int) error {
	managed := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		sts, ok := obj.(*appsv1.StatefulSet)
		return ok && isManagedOnDelete(sts)
	})
	revisionOrStrategyChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldSts, okOld := e.ObjectOld.(*appsv1.StatefulSet)
		newSts, okNew := e.ObjectNew.(*appsv1.StatefulSet)
		if !okOld || !okNew {
			return false
		}
		return oldSts.Status.UpdateRevision != newSts.Status.UpdateRevision ||
			oldSts.Spec.UpdateStrategy.Type != newSts.Spec.UpdateStrategy.Type ||
			oldSts.Generation != newSts.Generation
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentSyncs}).
		For(&appsv1.StatefulSet{}, builder.WithPredicates(managed, revisionOrStrategyChanged)).
		// After a restart, clusters with a rollout in flight go ahead of the settled fleet.
		Watches(&appsv1.StatefulSet{}, priority.EnqueueInFlight(rolloutInFlight), builder.WithPredicates(managed)).
		Owns(&corev1.Pod{}).
		// A replaced member the rollout waits on serves (rejoin.go): no Kubernetes object says so.
		WatchesRawSource(source.Channel(r.rejoin.events, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// rolloutInFlight tells from a StatefulSet's status alone whether pods remain to be replaced:
// fewer pods at the update revision than replicas. It only orders the work queue after a restart
// (no pods are read for it); what holds or excludes operations is package operation.
func rolloutInFlight(sts *appsv1.StatefulSet) bool {
	replicas := int32(1)
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	return sts.Status.UpdateRevision != "" && sts.Status.UpdatedReplicas < replicas
}
