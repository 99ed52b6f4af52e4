package membership

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
)

func TestObserve(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{Replicas: 3}}
	etcd.Status.ClusterID = "c1"
	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}, Status: appsv1.StatefulSetStatus{UpdateRevision: "r1"}}
	pod := func(name, rev string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{appsv1.StatefulSetRevisionLabel: rev}}}
	}
	pods := []corev1.Pod{pod("main-0", "r1"), pod("main-1", "r1"), pod("main-2", "r0")}
	leases := []coordinationv1.Lease{{ObjectMeta: metav1.ObjectMeta{Name: "main-2", Annotations: map[string]string{memberlease.AnnotationDataLostMemberID: "c"}}}}
	cs := &etcdclient.ClusterStatus{
		Members: []etcdclient.MemberStatus{
			{Name: "main-0", Reachable: true, ID: 0xa, LeaderID: 0xa, ClusterID: 0xc1},
			{Name: "main-1", Reachable: true, ID: 0xb, LeaderID: 0xa, ClusterID: 0xc1},
			{Name: "main-2"},
		},
		MemberList: []etcdclient.Member{
			{ID: 0xa, Name: "main-0", ClientURLs: []string{"x"}},
			{ID: 0xb, Name: "main-1", ClientURLs: []string{"x"}},
			{ID: 0xc, Name: "main-2", ClientURLs: []string{"x"}},
			{ID: 0xd, PeerURLs: []string{PeerURL(etcd, sts, 3)}, IsLearner: true},
			{ID: 0xe, Name: "other-0", ClientURLs: []string{"x"}},
		},
	}
	o := Observe(etcd, sts, pods, leases, cs, true)
	if !o.MembersKnown || !o.Bootstrapped || o.Desired != 3 || o.StatefulSetReplicas != 3 || !o.RolloutInFlight {
		t.Fatalf("observed %+v", o)
	}
	want := map[uint64]struct {
		name             string
		ordinal          int
		healthy, leader  bool
		started, learner bool
		lost             bool
	}{
		0xa: {"main-0", 0, true, true, true, false, false},
		0xb: {"main-1", 1, true, false, true, false, false},
		0xc: {"main-2", 2, false, false, true, false, true},
		0xd: {"main-3", 3, false, false, false, true, false},
		0xe: {"other-0", -1, false, false, true, false, false},
	}
	for _, m := range o.Members {
		w := want[m.ID]
		if m.Name != w.name || m.Ordinal != w.ordinal || m.Healthy != w.healthy || m.Leader != w.leader ||
			m.Started != w.started || m.Learner != w.learner || m.DataLost != w.lost {
			t.Errorf("member %x: got %+v, want %+v", m.ID, m, w)
		}
	}
	if got := clusterID(cs); got != "c1" {
		t.Errorf("cluster ID %q", got)
	}
}

// TestObservePodPeerURL: a pod's peer URL is known only for a pod at the StatefulSet's update
// revision (the manager's cache holds no pod spec), and then it is the one the template's stage
// listens on; a member's recorded peer URL is taken from the member list.
func TestObservePodPeerURL(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{Replicas: 3}}
	etcd.Status.ClusterID = "c1"
	tls := &druidv1alpha1.TLSConfig{}
	etcd.Spec.Etcd.ClientUrlTLS, etcd.Spec.Etcd.PeerUrlTLS = tls, &druidv1alpha1.PeerTLSConfig{TLSConfig: *tls}
	sts, err := resources.StatefulSet(etcd, resources.Settings{MemberAgentImage: "img"})
	if err != nil {
		t.Fatal(err)
	}
	sts.Status.UpdateRevision = "r-tls"
	pod := func(name, rev string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{appsv1.StatefulSetRevisionLabel: rev}}}
	}
	httpURL := func(i int) string { return peerURL(etcd, "http", i) }
	cs := &etcdclient.ClusterStatus{
		Members: []etcdclient.MemberStatus{{Name: "main-0", Reachable: true, ID: 0xa, LeaderID: 0xa}},
		MemberList: []etcdclient.Member{
			{ID: 0xa, Name: "main-0", PeerURLs: []string{httpURL(0)}},
			{ID: 0xb, Name: "main-1", PeerURLs: []string{httpURL(1)}},
			{ID: 0xc, Name: "main-2", PeerURLs: []string{httpURL(2)}},
		},
	}
	o := Observe(etcd, sts, []corev1.Pod{pod("main-0", "r-tls"), pod("main-1", "r-old")}, nil, cs, true)
	want := map[string]string{"main-0": "https://main-0.main-peer.ns.svc:2380", "main-1": "", "main-2": ""}
	for _, m := range o.Members {
		if m.PodPeerURL != want[m.Name] {
			t.Errorf("%s: pod peer URL %q, want %q", m.Name, m.PodPeerURL, want[m.Name])
		}
		if m.PeerURL != httpURL(m.Ordinal) {
			t.Errorf("%s: recorded peer URL %q", m.Name, m.PeerURL)
		}
	}
}
