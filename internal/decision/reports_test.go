package decision

import (
	"errors"
	"reflect"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
)

func TestReportsFromClusterStatus(t *testing.T) {
	cs := etcdclient.ClusterStatus{
		MemberList: []etcdclient.Member{{ID: 0xa1, Name: "etcd-main-0"}, {ID: 0xb2, Name: "etcd-main-1"}, {ID: 0xc3}},
		Members: []etcdclient.MemberStatus{
			{Name: "etcd-main-0", Reachable: true, ID: 0xa1, LeaderID: 0xa1},
			{Name: "etcd-main-1", Err: errors.New("deadline exceeded")},
			{Name: "etcd-main-2", Reachable: true, ID: 0xd4, LeaderID: 0},
		},
	}
	want := []roles.MemberReport{
		{Name: "etcd-main-0", ID: "a1", LeaderID: "a1", Reachable: true},
		{Name: "etcd-main-1", ID: "b2"},
		{Name: "etcd-main-2", ID: "d4", Reachable: true},
	}
	if got := ReportsFromClusterStatus(cs); !reflect.DeepEqual(got, want) {
		t.Fatalf("ReportsFromClusterStatus() = %+v, want %+v", got, want)
	}
}
