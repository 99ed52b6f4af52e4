package defrag

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "defrag"

// RegisterWithManager wires the controller to Etcd spec changes; between them it runs on its own
// requeues (the next scheduled time, or the next step of a run). A defragmentation holds a worker
// for up to etcdDefragTimeout, so concurrentSyncs bounds how many clusters defragment at once.
func (r *Reconciler) RegisterWithManager(mgr ctrl.Manager, concurrentSyncs int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentSyncs}).
		For(&druidv1alpha1.Etcd{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
