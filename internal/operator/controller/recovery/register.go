package recovery

import (
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "recovery"

// RegisterWithManager wires the controller to Etcds (the Ready condition turning QuorumLost is a
// status change, so every change counts), their StatefulSets, member Leases (the init steps
// report there) and pods. A cluster without quorum is also polled (StepInterval): the grace
// period running out makes no event.
func (r *Reconciler) RegisterWithManager(mgr ctrl.Manager, concurrentSyncs int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentSyncs}).
		For(&druidv1alpha1.Etcd{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&coordinationv1.Lease{}, builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(memberaccess.EtcdForPod)).
		Complete(r)
}
