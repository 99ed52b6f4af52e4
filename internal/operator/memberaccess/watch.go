package memberaccess

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// EtcdForPod maps a member pod to its Etcd by the selector labels the Etcd reconciler sets: a
// pod is owned by the StatefulSet, not the Etcd, so the controllers that watch an Etcd's pods
// need this way back.
func EtcdForPod(_ context.Context, obj client.Object) []reconcile.Request {
	l := obj.GetLabels()
	if l[resources.LabelManagedBy] != resources.ManagerName || l[resources.LabelInstance] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: l[resources.LabelInstance]}}}
}
