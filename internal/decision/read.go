package decision

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
)

// The readers below are how the controller and `plan` in live mode read a State from the
// apiserver; a state file goes through the same selection (MemberPods, OwningEtcdIn).

// EtcdOwner returns the controller reference of obj if it is an Etcd, else nil.
func EtcdOwner(obj metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Etcd" || ref.APIVersion != druidv1alpha1.GroupVersion.String() {
		return nil
	}
	return ref
}

// ReadOwningEtcd returns the Etcd that controls sts, or nil when sts has no Etcd owner or the
// owner is gone (or was replaced by another of the same name).
func ReadOwningEtcd(ctx context.Context, r client.Reader, sts *appsv1.StatefulSet) (*druidv1alpha1.Etcd, error) {
	ref := EtcdOwner(sts)
	if ref == nil {
		return nil, nil
	}
	etcd := &druidv1alpha1.Etcd{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: sts.Namespace, Name: ref.Name}, etcd); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if etcd.UID != ref.UID {
		return nil, nil
	}
	return etcd, nil
}

// OwningEtcdIn is ReadOwningEtcd on objects at hand, e.g. a state file. A UID is compared only
// when both sides carry one, since hand-written states often leave it out.
func OwningEtcdIn(sts *appsv1.StatefulSet, etcds []druidv1alpha1.Etcd) *druidv1alpha1.Etcd {
	ref := EtcdOwner(sts)
	if ref == nil {
		return nil
	}
	for i := range etcds {
		e := &etcds[i]
		if e.Namespace == sts.Namespace && e.Name == ref.Name && (e.UID == "" || ref.UID == "" || e.UID == ref.UID) {
			return e
		}
	}
	return nil
}

// ReadMemberPods lists the pods matching the StatefulSet's selector and keeps MemberPods.
func ReadMemberPods(ctx context.Context, r client.Reader, sts *appsv1.StatefulSet) ([]corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("parsing selector of StatefulSet %s/%s: %w", sts.Namespace, sts.Name, err)
	}
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(sts.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("listing pods of StatefulSet %s/%s: %w", sts.Namespace, sts.Name, err)
	}
	return MemberPods(sts, list.Items), nil
}

// ReadMemberLeases lists the Leases carrying etcd's member selector labels.
func ReadMemberLeases(ctx context.Context, r client.Reader, etcd *druidv1alpha1.Etcd) ([]coordinationv1.Lease, error) {
	leases := &coordinationv1.LeaseList{}
	if err := r.List(ctx, leases, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SelectorLabels(etcd))); err != nil {
		return nil, fmt.Errorf("listing member leases of %s/%s: %w", etcd.Namespace, etcd.Name, err)
	}
	return leases.Items, nil
}
