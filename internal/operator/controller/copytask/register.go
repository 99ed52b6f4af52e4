package copytask

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "etcdcopybackupstask"

// RegisterWithManager wires the controller to EtcdCopyBackupsTasks, with workers tasks copied at
// once (controllers.etcdCopyBackupsTask.concurrentSyncs). Only spec changes and new tasks wake it
// (its own status writes do not: they would start a second look at a task just recorded); waits
// and retries run on its own requeues, as do the looks at a copy under way. The copies running
// are cancelled when the manager stops.
func (r *Reconciler) RegisterWithManager(mgr ctrl.Manager, workers int) error {
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		r.copies.stop()
		return nil
	})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(&druidv1alpha1.EtcdCopyBackupsTask{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
