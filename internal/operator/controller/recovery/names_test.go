package recovery

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// TestObserveMapsMemberNamesToPods: with spec.memberNamePrefix the recorded voters, the restore
// order and the Leases carry etcd member names (<prefix>-<pod>); the planner sees them by pod,
// with each pod's own evidence. A voter whose name maps to no pod keeps its name and proves
// nothing, whatever pod shares the rest of its name.
func TestObserveMapsMemberNamesToPods(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"},
		Spec: druidv1alpha1.EtcdSpec{Replicas: 3, MemberNamePrefix: ptr.To("p")}}
	etcd.Status.ClusterID = "c1"
	etcd.Status.Voters = []druidv1alpha1.RecordedVoter{{Name: "p-main-0", ID: "a"}, {Name: "p-main-1", ID: "b"}, {Name: "main-2", ID: "c"}}
	etcd.Status.Recovery = &druidv1alpha1.RecoveryRequest{Member: "p-main-1", PodUID: "u1", Token: "t"}
	var pods []corev1.Pod
	var leases []coordinationv1.Lease
	for i := range 3 {
		name := resources.PodName(etcd, i)
		uid := types.UID("u" + name[len(name)-1:])
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: resources.MemberInitContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		pods = append(pods, p)
		report := memberlease.StartReport{PodUID: string(uid), Rule: "wait/cluster-unreachable", Data: memberlease.DataEmpty}
		leases = append(leases, coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: resources.MemberNameOf(etcd, name),
			Annotations: map[string]string{memberlease.AnnotationStartReport: report.Annotation()}}})
	}
	o := Observe(etcd, pods, leases, nil, time.Minute, time.Now())
	if o.InProgress == nil || o.InProgress.Member != "main-1" {
		t.Fatalf("order in progress %+v, want it for pod main-1", o.InProgress)
	}
	want := []struct {
		name     string
		podUID   string
		dataGone bool
	}{{"main-0", "u0", true}, {"main-1", "u1", true}, {"main-2", "", false}}
	if len(o.Voters) != len(want) {
		t.Fatalf("voters %+v", o.Voters)
	}
	for i, w := range want {
		v := o.Voters[i]
		if v.Name != w.name || v.PodUID != w.podUID || v.DataGone != w.dataGone {
			t.Errorf("voter %d: %+v, want %+v", i, v, w)
		}
	}
	for _, p := range o.Pods {
		if !p.ProvedEmpty {
			t.Errorf("pod %s: its Lease's report not read: %+v", p.Name, p)
		}
	}
}
