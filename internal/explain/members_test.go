package explain

import (
	"context"
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

type recordingQuerier struct {
	cluster string
	targets []etcdclient.Target
}

func (r *recordingQuerier) Query(_ context.Context, cluster string, _ conductortls.ClientMaterial, targets []etcdclient.Target) (etcdclient.ClusterStatus, error) {
	r.cluster, r.targets = cluster, targets
	return etcdclient.ClusterStatus{}, errors.New("no member of cluster answered")
}

func TestAskMembersTargets(t *testing.T) {
	sts := statefulSet("etcd-main", 3)
	sts.Spec.Template.Spec.Containers = []corev1.Container{{Name: "etcd", Ports: []corev1.ContainerPort{{Name: "peer", ContainerPort: 2380}, {Name: "client", ContainerPort: 3379}}}}
	withIP := func(ip string) podOpt { return func(p *corev1.Pod) { p.Status.PodIP = ip } }
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	st := State{StatefulSet: sts, Pods: []corev1.Pod{
		*memberPod("etcd-main-0", newRev, owned(sts), withIP("10.1.0.7")),
		*memberPod("etcd-main-1", newRev, owned(sts)), // no IP yet
		*memberPod("etcd-main-2", newRev, owned(sts), withIP("10.1.0.9"), terminating),
		*memberPod("etcd-events-0", newRev, withIP("10.1.0.3")),
	}}
	q := &recordingQuerier{}
	reports, err := AskMembers(context.Background(), q, conductortls.ClientMaterial{}, st, map[string]string{"etcd-main-1": "127.0.0.1:23791"})
	if err == nil || len(reports) != 0 {
		t.Fatalf("AskMembers() = %v, %v; want the querier's error and no reports", reports, err)
	}
	want := []etcdclient.Target{
		{Name: "etcd-main-0", Address: "10.1.0.7:3379", ServerName: "etcd-main-0.etcd-main-peer.shoot.svc"},
		{Name: "etcd-main-1", Address: "127.0.0.1:23791", ServerName: "etcd-main-1.etcd-main-peer.shoot.svc"},
	}
	if q.cluster != "shoot/etcd-main" || !reflect.DeepEqual(q.targets, want) {
		t.Fatalf("queried %s with %+v, want shoot/etcd-main with %+v", q.cluster, q.targets, want)
	}
}

func TestAskMembersWithoutAddresses(t *testing.T) {
	sts := statefulSet("etcd-main", 1)
	st := State{StatefulSet: sts, Pods: []corev1.Pod{*memberPod("etcd-main-0", newRev, owned(sts))}}
	if _, err := AskMembers(context.Background(), &recordingQuerier{}, conductortls.ClientMaterial{}, st, nil); err == nil {
		t.Fatal("AskMembers() without any address did not fail")
	}
}
