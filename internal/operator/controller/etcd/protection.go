package etcd

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// managedObjects are the objects of e the chart's component protection policy guards, empty and
// named, to be read: every kind the reconciler writes.
func managedObjects(e *druidv1alpha1.Etcd) []client.Object {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: e.Namespace, Name: name} }
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta(resources.ServiceAccountName(e))},
		&rbacv1.Role{ObjectMeta: meta(resources.MemberAgentRoleName(e))},
		&rbacv1.RoleBinding{ObjectMeta: meta(resources.MemberAgentRoleName(e))},
		&corev1.ConfigMap{ObjectMeta: meta(resources.ConfigMapName(e))},
		&corev1.Service{ObjectMeta: meta(resources.PeerServiceName(e))},
		&corev1.Service{ObjectMeta: meta(resources.ClientServiceName(e))},
		&policyv1.PodDisruptionBudget{ObjectMeta: meta(resources.PodDisruptionBudgetName(e))},
		&networkingv1.NetworkPolicy{ObjectMeta: meta(resources.MemberNetworkPolicyName(e))},
		&appsv1.StatefulSet{ObjectMeta: meta(resources.StatefulSetName(e))},
		// Looked for even with backups off: ones left from when they were on are still ours.
		&coordinationv1.Lease{ObjectMeta: meta(memberlease.FullSnapshotLeaseName(e))},
		&coordinationv1.Lease{ObjectMeta: meta(memberlease.DeltaSnapshotLeaseName(e))},
	}
	for _, lease := range resources.MemberLeaseNames(e) {
		objs = append(objs, &coordinationv1.Lease{ObjectMeta: meta(lease)})
	}
	return objs
}

// syncProtection mirrors the Etcd's etcd-druid protection annotation onto every object it
// controls (resources.MarkProtection), where the chart's admission policy reads it. It runs
// before the spec gate: lifting protection is no spec change, and an Etcd whose spec
// reconciliation is suspended is exactly one a user may need to repair by hand. Only the one
// annotation is written (a merge patch), so nothing else is overwritten.
// Objects missing or not controlled by the Etcd are left to the sync steps.
func (r *Reconciler) syncProtection(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
	for _, obj := range managedObjects(etcd) {
		if err := r.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading %T %s to mark its protection: %w", obj, obj.GetName(), err)
		}
		if !metav1.IsControlledBy(obj, etcd) {
			continue
		}
		// A merge patch of the one annotation: the Leases are renewed by their member-agents
		// every few seconds, and a whole-object update would lose races to them.
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		if !resources.MarkProtection(etcd, obj) {
			continue
		}
		if err := r.client.Patch(ctx, obj, patch); err != nil {
			return fmt.Errorf("marking the protection of %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}
