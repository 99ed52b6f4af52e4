package memberaccess

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
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// Which objects are an Etcd's and its members', and the reads of them the controllers share. The
// `plan` command reads a live State with the same readers, and a state file goes through the same
// selection (MemberPods, OwningEtcdIn), so it sees what the controller sees.

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

// MemberPods keeps the pods the StatefulSet controls: same namespace and a controller
// reference with the StatefulSet's UID. Pods of an older StatefulSet of the same name, other
// etcds' pods and orphans are not members.
func MemberPods(sts *appsv1.StatefulSet, pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, pod := range pods {
		if pod.Namespace != sts.Namespace {
			continue
		}
		if ref := metav1.GetControllerOf(&pod); ref != nil && ref.UID == sts.UID {
			out = append(out, pod)
		}
	}
	return out
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

// ReadLabelledPods lists the pods carrying etcd's member selector labels, whatever controls them
// (ReadMemberPods keeps only the StatefulSet's own): what the defragmentation controller and
// the Etcd reconciler (Reach) dial, which need no StatefulSet to find the members.
func ReadLabelledPods(ctx context.Context, r client.Reader, etcd *druidv1alpha1.Etcd) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SelectorLabels(etcd))); err != nil {
		return nil, fmt.Errorf("listing member pods: %w", err)
	}
	return pods.Items, nil
}

// ReadMemberLeases lists the Leases carrying etcd's member selector labels.
func ReadMemberLeases(ctx context.Context, r client.Reader, etcd *druidv1alpha1.Etcd) ([]coordinationv1.Lease, error) {
	leases := &coordinationv1.LeaseList{}
	if err := r.List(ctx, leases, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SelectorLabels(etcd))); err != nil {
		return nil, fmt.Errorf("listing member leases of %s/%s: %w", etcd.Namespace, etcd.Name, err)
	}
	return leases.Items, nil
}
