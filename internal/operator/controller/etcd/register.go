package etcd

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/priority"
)

// ControllerName names the controller in logs and metrics.
const ControllerName = "etcd"

// maxRetryDelay caps the backoff of failed reconciles (controller-runtime's default cap is about
// 16 minutes). A foreign object blocking an Etcd is only noticed gone by a retry, since its
// deletion is no event of an object the Etcd owns.
const maxRetryDelay = time.Minute

// clusterIDRecorded lets through the status change that records the cluster as bootstrapped:
// the ConfigMap's ETCD_INITIAL_CLUSTER_STATE follows it.
var clusterIDRecorded = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldEtcd, okOld := e.ObjectOld.(*druidv1alpha1.Etcd)
	newEtcd, okNew := e.ObjectNew.(*druidv1alpha1.Etcd)
	return okOld && okNew && oldEtcd.Status.ClusterID != newEtcd.Status.ClusterID
}}

// disruptionHealthChanged lets through the status changes the PodDisruptionBudget follows
// (resources.DisruptionBudget): AllMembersReady or BackupReady changing status, or the number of
// members whose status is Ready changing. Messages and other conditions wake nothing.
var disruptionHealthChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldEtcd, okOld := e.ObjectOld.(*druidv1alpha1.Etcd)
	newEtcd, okNew := e.ObjectNew.(*druidv1alpha1.Etcd)
	return okOld && okNew && disruptionHealth(oldEtcd) != disruptionHealth(newEtcd)
}}

// disruptionHealth is what of an Etcd's status its PodDisruptionBudget depends on.
func disruptionHealth(e *druidv1alpha1.Etcd) string {
	status := func(t druidv1alpha1.ConditionType) druidv1alpha1.ConditionStatus {
		if c := druidv1alpha1.FindCondition(e.Status.Conditions, t); c != nil {
			return c.Status
		}
		return ""
	}
	ready := 0
	for _, m := range e.Status.Members {
		if m.Status == druidv1alpha1.EtcdMemberStatusReady {
			ready++
		}
	}
	return fmt.Sprintf("%s/%s/%d", status(druidv1alpha1.ConditionTypeAllMembersReady), status(druidv1alpha1.ConditionTypeBackupReady), ready)
}

// RegisterWithManager wires the reconciler: it reacts to spec changes of an Etcd (not to its
// status, which other controllers write, except the health its PodDisruptionBudget follows) and
// to changes of the objects it owns.
func (r *Reconciler) RegisterWithManager(mgr ctrl.Manager, concurrentSyncs int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: concurrentSyncs,
			RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
				// The overall limit of controller-runtime's default: 10 per second, bursts of 100.
				&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
			),
		}).
		For(&druidv1alpha1.Etcd{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}, clusterIDRecorded, disruptionHealthChanged))).
		// After a restart, Etcds whose spec changed meanwhile go ahead of the settled fleet.
		Watches(&druidv1alpha1.Etcd{}, priority.EnqueueInFlight(specChanged)).
		Owns(&appsv1.StatefulSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&coordinationv1.Lease{}, builder.WithPredicates(predicate.Funcs{
			// Agents renew leases every few seconds; only creation and deletion matter here.
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		Complete(r)
}

// specChanged: the Etcd's spec changed since it was last converged.
func specChanged(etcd *druidv1alpha1.Etcd) bool {
	return etcd.Status.ObservedGeneration == nil || *etcd.Status.ObservedGeneration != etcd.Generation
}
