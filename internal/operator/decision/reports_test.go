package decision

import (
	"errors"
	"reflect"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
)

func TestReportsFromClusterStatus(t *testing.T) {
	// Targets are pods; the member list names etcd members, <prefix>-<pod> with a prefix.
	answers := []etcdclient.MemberStatus{
		{Name: "etcd-main-0", Reachable: true, ID: 0xa1, LeaderID: 0xa1},
		{Name: "etcd-main-1", Err: errors.New("deadline exceeded")},
		{Name: "etcd-main-2", Reachable: true, ID: 0xd4, LeaderID: 0},
	}
	want := []roles.MemberReport{
		{Name: "etcd-main-0", ID: "a1", LeaderID: "a1", Reachable: true},
		{Name: "etcd-main-1", ID: "b2"},
		{Name: "etcd-main-2", ID: "d4", Reachable: true},
	}
	tests := []struct {
		name   string
		prefix *string
		list   []etcdclient.Member
		want   []roles.MemberReport
	}{
		{name: "members named after their pods",
			list: []etcdclient.Member{{ID: 0xa1, Name: "etcd-main-0"}, {ID: 0xb2, Name: "etcd-main-1"}, {ID: 0xc3}},
			want: want},
		{name: "members named <prefix>-<pod> are reported by pod", prefix: ptr.To("p"),
			list: []etcdclient.Member{{ID: 0xa1, Name: "p-etcd-main-0"}, {ID: 0xb2, Name: "p-etcd-main-1"}, {ID: 0xc3}},
			want: want},
		{name: "a member without the prefix is no pod's: left out, never merged with the pod of its name", prefix: ptr.To("p"),
			list: []etcdclient.Member{{ID: 0xa1, Name: "p-etcd-main-0"}, {ID: 0xb2, Name: "etcd-main-1"}, {ID: 0xe5, Name: "other-0"}},
			want: []roles.MemberReport{
				{Name: "etcd-main-0", ID: "a1", LeaderID: "a1", Reachable: true},
				{Name: "etcd-main-1"},
				{Name: "etcd-main-2", ID: "d4", Reachable: true},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main"}, Spec: druidv1alpha1.EtcdSpec{MemberNamePrefix: tt.prefix}}
			cs := etcdclient.ClusterStatus{MemberList: tt.list, Members: answers}
			if got := ReportsFromClusterStatus(etcd, cs); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ReportsFromClusterStatus() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestLeasesByPod: roles knows members by pod, so the member Leases (named <prefix>-<pod> with
// spec.memberNamePrefix) are handed to it under their pods; a Lease of no pod is left out.
func TestLeasesByPod(t *testing.T) {
	for _, tt := range []struct {
		name   string
		prefix *string
		leases []string
		want   []string
	}{
		{"no prefix", nil, []string{"etcd-main-0", "etcd-main-1", "other-0"}, []string{"etcd-main-0", "etcd-main-1"}},
		{"prefix", ptr.To("p"), []string{"p-etcd-main-0", "etcd-main-1", "p-etcd-main-2"}, []string{"etcd-main-0", "etcd-main-2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main"}, Spec: druidv1alpha1.EtcdSpec{MemberNamePrefix: tt.prefix}}
			var leases []coordinationv1.Lease
			for _, n := range tt.leases {
				leases = append(leases, coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n}})
			}
			var got []string
			for _, l := range leasesByPod(etcd, leases) {
				got = append(got, l.Name)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("leasesByPod = %v, want %v", got, tt.want)
			}
			if leases[0].Name != tt.leases[0] {
				t.Errorf("the caller's Lease was renamed: %s", leases[0].Name)
			}
		})
	}
}
