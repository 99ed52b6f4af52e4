package membership

import (
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/priority"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "membership"

// RegisterWithManager wires the controller to spec changes of Etcds (replicas), their
// StatefulSets and Leases (the init step reports there) and their pods. A change in progress is
// also polled (StepInterval), since what it waits on (a learner catching up) makes no event.
func (r *Reconciler) RegisterWithManager(mgr ctrl.Manager, concurrentSyncs int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentSyncs}).
		For(&druidv1alpha1.Etcd{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// After a restart, clusters with a membership change under way go ahead of the fleet.
		Watches(&druidv1alpha1.Etcd{}, priority.EnqueueInFlight(scaleInFlight)).
		Owns(&appsv1.StatefulSet{}).
		Owns(&coordinationv1.Lease{}, builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(memberaccess.EtcdForPod)).
		Complete(r)
}

// scaleInFlight: a membership step is under way, or the spec (perhaps spec.replicas) changed and
// was not acted on yet. It only orders the work queue after a restart.
func scaleInFlight(etcd *druidv1alpha1.Etcd) bool {
	return operation.Of(etcd).Has(operation.KindScale) || etcd.Generation != ptr.Deref(etcd.Status.ObservedGeneration, 0)
}
