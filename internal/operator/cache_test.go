package operator

import (
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

func TestMemberPodView(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-0", Namespace: "ns", UID: "u1", ResourceVersion: "7",
			Labels:        map[string]string{"controller-revision-hash": "etcd-main-1"},
			Annotations:   map[string]string{"etcd-conductor.io/handover-failures": "1"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{NodeName: "node-1", Hostname: "etcd-main-0", Subdomain: "etcd-main-peer",
			Containers: []corev1.Container{{Name: "etcd", Image: "etcd:3.6.8", Args: []string{"--name=etcd-main-0"}}},
			Volumes:    []corev1.Volume{{Name: "data"}}},
		Status: corev1.PodStatus{PodIP: "10.0.0.2", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", Ready: true}}},
	}
	out, err := memberPodView(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"no managedFields", got.ManagedFields == nil},
		{"no containers or volumes", len(got.Spec.Containers) == 0 && len(got.Spec.Volumes) == 0},
		{"node and DNS names kept", got.Spec.NodeName == "node-1" && got.Spec.Hostname == "etcd-main-0" && got.Spec.Subdomain == "etcd-main-peer"},
		{"labels, annotations, UID, resourceVersion kept", got.Labels["controller-revision-hash"] == "etcd-main-1" &&
			got.Annotations["etcd-conductor.io/handover-failures"] == "1" && got.UID == "u1" && got.ResourceVersion == "7"},
		{"status kept", got.Status.PodIP == "10.0.0.2" && len(got.Status.Conditions) == 1 && got.Status.ContainerStatuses[0].Ready},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Errorf("%s: not so in %+v", c.name, got)
			}
		})
	}
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}}
	if out, _ := memberPodView(other); out != other {
		t.Errorf("a non-pod object changed")
	}
}

// TestCacheHoldsOnlyOwnPodsAndLeases: pods and Leases are cached only with the managed-by label
// every object the operator makes carries, so the manager's memory follows its Etcds, not every
// pod and node Lease of the cluster.
func TestCacheHoldsOnlyOwnPodsAndLeases(t *testing.T) {
	opts := cacheOptions(nil)
	ours := labels.Set{resources.LabelManagedBy: resources.ManagerName}
	byType := map[string]cache.ByObject{}
	for obj, by := range opts.ByObject {
		byType[fmt.Sprintf("%T", obj)] = by
	}
	for _, obj := range []client.Object{&corev1.Pod{}, &coordinationv1.Lease{}} {
		by, ok := byType[fmt.Sprintf("%T", obj)]
		if !ok || by.Label == nil {
			t.Fatalf("%T cached without a label selector", obj)
		}
		if !by.Label.Matches(ours) {
			t.Errorf("%T: the operator's own objects (%v) are not selected by %s", obj, ours, by.Label)
		}
		if by.Label.Matches(labels.Set{"component": "kube-apiserver"}) {
			t.Errorf("%T: objects without the label are selected by %s", obj, by.Label)
		}
	}
}
