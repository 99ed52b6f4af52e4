package membership

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
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
			{ID: 0xd, PeerURLs: PeerURLs(etcd, sts, 3), IsLearner: true},
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

// TestObservePodPeerURL: a pod's peer URLs are known only for a pod at the StatefulSet's update
// revision (the manager's cache holds no pod spec), and then they are the ones the template's
// stage listens on, followed by the member's additional ones; a member's recorded peer URLs are
// taken from the member list.
func TestObservePodPeerURL(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix *string
		extra  []druidv1alpha1.MemberPeerURLs
		want   map[string][]string
	}{
		{name: "service URL only",
			want: map[string][]string{"main-0": {"https://main-0.main-peer.ns.svc:2380"}}},
		{name: "with additional peer URLs, by member name", extra: []druidv1alpha1.MemberPeerURLs{{MemberName: "main-0", URLs: []string{"https://10.1.0.1:2380"}}},
			want: map[string][]string{"main-0": {"https://main-0.main-peer.ns.svc:2380", "https://10.1.0.1:2380"}}},
		{name: "with a prefix, additional peer URLs name the prefixed member", prefix: ptr.To("p"),
			extra: []druidv1alpha1.MemberPeerURLs{{MemberName: "p-main-0", URLs: []string{"https://10.1.0.1:2380"}}, {MemberName: "main-1", URLs: []string{"https://10.1.0.2:2380"}}},
			want:  map[string][]string{"main-0": {"https://main-0.main-peer.ns.svc:2380", "https://10.1.0.1:2380"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{Replicas: 3, MemberNamePrefix: tc.prefix}}
			etcd.Status.ClusterID = "c1"
			tls := &druidv1alpha1.TLSConfig{}
			etcd.Spec.Etcd.ClientUrlTLS, etcd.Spec.Etcd.PeerUrlTLS = tls, &druidv1alpha1.PeerTLSConfig{TLSConfig: *tls}
			etcd.Spec.Etcd.AdditionalAdvertisePeerURLs = tc.extra
			sts, err := resources.StatefulSet(etcd, resources.Settings{MemberAgentImage: "img"})
			if err != nil {
				t.Fatal(err)
			}
			sts.Status.UpdateRevision = "r-tls"
			pod := func(name, rev string) corev1.Pod {
				return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{appsv1.StatefulSetRevisionLabel: rev}}}
			}
			httpURL := func(i int) string { return resources.ServicePeerURL(etcd, "http", resources.PodName(etcd, i)) }
			name := func(i int) string { return resources.MemberNameOf(etcd, resources.PodName(etcd, i)) }
			cs := &etcdclient.ClusterStatus{
				Members: []etcdclient.MemberStatus{{Name: "main-0", Reachable: true, ID: 0xa, LeaderID: 0xa}},
				MemberList: []etcdclient.Member{
					{ID: 0xa, Name: name(0), PeerURLs: []string{httpURL(0)}},
					{ID: 0xb, Name: name(1), PeerURLs: []string{httpURL(1)}},
					{ID: 0xc, Name: name(2), PeerURLs: []string{httpURL(2)}},
				},
			}
			o := Observe(etcd, sts, []corev1.Pod{pod("main-0", "r-tls"), pod("main-1", "r-old")}, nil, cs, true)
			if len(o.Members) != 3 {
				t.Fatalf("members %+v", o.Members)
			}
			for _, m := range o.Members {
				if !slices.Equal(m.PodPeerURLs, tc.want[m.Name]) {
					t.Errorf("%s: pod peer URLs %q, want %q", m.Name, m.PodPeerURLs, tc.want[m.Name])
				}
				if !slices.Equal(m.PeerURLs, []string{httpURL(m.Ordinal)}) {
					t.Errorf("%s: recorded peer URLs %q", m.Name, m.PeerURLs)
				}
			}
		})
	}
}

// TestObserveMemberNames: with spec.memberNamePrefix, etcd's members and the Leases are named
// <prefix>-<pod> and the planner sees them by pod. A member whose name does not map is still
// its pod's when one of its peer URLs names that pod under the peer Service (etcd admits no peer
// URL twice), so a name that does not carry the prefix never makes a healthy member look
// foreign; one neither way maps is foreign (ordinal -1, removed only after the grace), as ever.
func TestObserveMemberNames(t *testing.T) {
	peer := func(pod string) []string { return []string{"https://" + pod + ".main-peer.ns.svc:2380"} }
	for _, tc := range []struct {
		name        string
		prefix      *string
		member      etcdclient.Member
		wantName    string
		wantOrdinal int
	}{
		{"named after its pod", nil, etcdclient.Member{Name: "main-1", PeerURLs: peer("main-1")}, "main-1", 1},
		{"prefixed name maps to its pod", ptr.To("p"), etcdclient.Member{Name: "p-main-1", PeerURLs: peer("main-1")}, "main-1", 1},
		{"prefixed learner not started: its peer URL", ptr.To("p"), etcdclient.Member{PeerURLs: peer("main-1")}, "main-1", 1},
		{"name without the prefix, peer URL of a pod: still that pod's", ptr.To("p"), etcdclient.Member{Name: "main-1", PeerURLs: peer("main-1")}, "main-1", 1},
		{"other prefix, peer URL of a pod: still that pod's", ptr.To("p"), etcdclient.Member{Name: "q-main-1", PeerURLs: peer("main-1")}, "main-1", 1},
		{"a prefixed name wins over the peer URL", ptr.To("p"), etcdclient.Member{Name: "p-main-2", PeerURLs: peer("main-1")}, "main-2", 2},
		{"prefix set, unprefixed name and a foreign peer URL: foreign", ptr.To("p"), etcdclient.Member{Name: "main-1", PeerURLs: []string{"https://10.0.0.9:2380"}}, "main-1", -1},
		{"no prefix, prefixed name and a foreign peer URL: foreign", nil, etcdclient.Member{Name: "p-main-1", PeerURLs: []string{"https://10.0.0.9:2380"}}, "p-main-1", -1},
		{"another Etcd's peer Service: foreign", nil, etcdclient.Member{Name: "other-1", PeerURLs: []string{"https://main-1.other-peer.ns.svc:2380"}}, "other-1", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{Replicas: 3, MemberNamePrefix: tc.prefix}}
			tc.member.ID = 0xb
			name, ordinal := memberPod(etcd, tc.member)
			if name != tc.wantName || ordinal != tc.wantOrdinal {
				t.Errorf("memberPod = %q, %d; want %q, %d", name, ordinal, tc.wantName, tc.wantOrdinal)
			}
		})
	}
}

// TestObserveDataLostByPrefixedLease: the data-lost report is read from the member's Lease, named
// <prefix>-<pod>; a Lease named as the bare pod is no member's and reports nothing.
func TestObserveDataLostByPrefixedLease(t *testing.T) {
	for _, tc := range []struct {
		lease string
		want  bool
	}{{"p-main-2", true}, {"main-2", false}} {
		t.Run(tc.lease, func(t *testing.T) {
			etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{Replicas: 3, MemberNamePrefix: ptr.To("p")}}
			sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
			pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "main-2"}}}
			leases := []coordinationv1.Lease{{ObjectMeta: metav1.ObjectMeta{Name: tc.lease, Annotations: map[string]string{memberlease.AnnotationDataLostMemberID: "c"}}}}
			cs := &etcdclient.ClusterStatus{MemberList: []etcdclient.Member{{ID: 0xc, Name: "p-main-2", ClientURLs: []string{"x"}}}}
			o := Observe(etcd, sts, pods, leases, cs, true)
			if len(o.Members) != 1 || o.Members[0].Name != "main-2" || o.Members[0].DataLost != tc.want {
				t.Fatalf("members %+v, want main-2 with data lost %v", o.Members, tc.want)
			}
		})
	}
}

// TestPeerURLsOfALearner: a learner is added with the peer URLs its pod will advertise: the
// template's scheme and additional URLs, the spec's only before there is a template.
func TestPeerURLsOfALearner(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{Replicas: 3, MemberNamePrefix: ptr.To("p")}}
	etcd.Spec.Etcd.AdditionalAdvertisePeerURLs = []druidv1alpha1.MemberPeerURLs{{MemberName: "p-main-2", URLs: []string{"http://10.0.0.2:2380"}}}
	sts, err := resources.StatefulSet(etcd, resources.Settings{MemberAgentImage: "img"})
	if err != nil {
		t.Fatal(err)
	}
	templated := []string{"http://main-2.main-peer.ns.svc:2380", "http://10.0.0.2:2380"}
	if got := PeerURLs(etcd, sts, 2); !slices.Equal(got, templated) {
		t.Errorf("PeerURLs = %v, want %v", got, templated)
	}
	// The spec changed, the template not yet: the pod runs the template.
	etcd.Spec.Etcd.AdditionalAdvertisePeerURLs[0].URLs = []string{"http://10.0.0.3:2380"}
	if got := PeerURLs(etcd, sts, 2); !slices.Equal(got, templated) {
		t.Errorf("PeerURLs with the template behind the spec = %v, want the template's %v", got, templated)
	}
	if got, want := PeerURLs(etcd, nil, 2), []string{"http://main-2.main-peer.ns.svc:2380", "http://10.0.0.3:2380"}; !slices.Equal(got, want) {
		t.Errorf("PeerURLs without a StatefulSet = %v, want the spec's %v", got, want)
	}
}
