package memberaccess

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

const ns = "shoot"

// testEtcd serves clients on a port of its own, so a target shows where its port came from.
func testEtcd() *druidv1alpha1.Etcd {
	return &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: ns, UID: "etcd-uid"},
		Spec: druidv1alpha1.EtcdSpec{Etcd: druidv1alpha1.EtcdConfig{ClientPort: ptr.To[int32](3379)}}}
}

func testStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: ns, UID: "sts-uid"}}
}

func memberPod(name string, owner types.UID) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "etcd-main", UID: owner, Controller: ptr.To(true)}}
	}
	return p
}

func TestMemberPods(t *testing.T) {
	elsewhere := memberPod("etcd-main-1", "sts-uid")
	elsewhere.Namespace = "other"
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"controlled by the StatefulSet", memberPod("etcd-main-0", "sts-uid"), true},
		{"in another namespace", elsewhere, false},
		{"orphan", memberPod("etcd-main-2", ""), false},
		{"of an older StatefulSet of the same name", memberPod("etcd-main-3", "old-sts-uid"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MemberPods(testStatefulSet(), []corev1.Pod{tc.pod})
			if (len(got) == 1) != tc.want {
				t.Fatalf("MemberPods() = %v, want member=%v", got, tc.want)
			}
		})
	}
}

func TestOwningEtcdIn(t *testing.T) {
	sts := testStatefulSet()
	sts.OwnerReferences = []metav1.OwnerReference{{APIVersion: druidv1alpha1.GroupVersion.String(), Kind: "Etcd", Name: "etcd-main", UID: "etcd-uid", Controller: ptr.To(true)}}
	replaced := *testEtcd()
	replaced.UID = "another-uid"
	noUID := *testEtcd()
	noUID.UID = ""
	for _, tc := range []struct {
		name  string
		etcds []druidv1alpha1.Etcd
		want  bool
	}{
		{"owner present", []druidv1alpha1.Etcd{*testEtcd()}, true},
		{"owner recorded without UID", []druidv1alpha1.Etcd{noUID}, true},
		{"replaced by another of the same name", []druidv1alpha1.Etcd{replaced}, false},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OwningEtcdIn(sts, tc.etcds); (got != nil) != tc.want {
				t.Fatalf("OwningEtcdIn() = %v, want found=%v", got, tc.want)
			}
		})
	}
}

func TestEtcdOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		ref  metav1.OwnerReference
		want bool
	}{
		{"an Etcd controls it", metav1.OwnerReference{APIVersion: druidv1alpha1.GroupVersion.String(), Kind: "Etcd", Name: "e", Controller: ptr.To(true)}, true},
		{"an Etcd owns it without controlling it", metav1.OwnerReference{APIVersion: druidv1alpha1.GroupVersion.String(), Kind: "Etcd", Name: "e"}, false},
		{"an Etcd of another group controls it", metav1.OwnerReference{APIVersion: "other.example/v1", Kind: "Etcd", Name: "e", Controller: ptr.To(true)}, false},
		{"something else controls it", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "e", Controller: ptr.To(true)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{tc.ref}}
			if got := EtcdOwner(obj); (got != nil) != tc.want {
				t.Fatalf("EtcdOwner() = %v, want found=%v", got, tc.want)
			}
		})
	}
}

func TestEtcdForPod(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   []types.NamespacedName
	}{
		{"a member pod", map[string]string{"app.kubernetes.io/managed-by": "etcd-conductor", "app.kubernetes.io/instance": "etcd-main"},
			[]types.NamespacedName{{Namespace: ns, Name: "etcd-main"}}},
		{"managed by something else", map[string]string{"app.kubernetes.io/managed-by": "other", "app.kubernetes.io/instance": "etcd-main"}, nil},
		{"no instance", map[string]string{"app.kubernetes.io/managed-by": "etcd-conductor"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main-0", Namespace: ns, Labels: tc.labels}}
			var got []types.NamespacedName
			for _, r := range EtcdForPod(t.Context(), pod) {
				got = append(got, r.NamespacedName)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("EtcdForPod() = %v, want %v", got, tc.want)
			}
		})
	}
}
