package status

import (
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "etcd-status"

// RegisterWithManager wires the status controller to the Etcd, its StatefulSet and Leases, and
// its pods (owned by the StatefulSet, so mapped back through their instance label).
func (r *Reconciler) RegisterWithManager(mgr ctrl.Manager, concurrentSyncs int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrentSyncs}).
		For(&druidv1alpha1.Etcd{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&coordinationv1.Lease{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(memberaccess.EtcdForPod)).
		Complete(r)
}
