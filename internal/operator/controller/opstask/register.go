package opstask

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "etcdopstask"

// RegisterWithManager wires the controller to EtcdOpsTasks; between their changes it runs on its
// own requeues (the Lease is polled while a snapshot is awaited, a finished task until its TTL).
// One worker: admission of two tasks of one Etcd is then never decided at the same time.
func (r *Reconciler) RegisterWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		For(&druidv1alpha1.EtcdOpsTask{}).
		Complete(r)
}
