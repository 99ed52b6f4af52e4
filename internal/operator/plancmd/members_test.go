package plancmd

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

type recordingQuerier struct {
	memberaccess.Pool // what plan does not ask: a call panics
	cluster           string
	targets           []etcdclient.Target
}

func (r *recordingQuerier) Query(_ context.Context, cluster string, _ conductortls.ClientMaterial, targets []etcdclient.Target) (etcdclient.ClusterStatus, error) {
	r.cluster, r.targets = cluster, targets
	return etcdclient.ClusterStatus{}, errors.New("no member of cluster answered")
}

func TestAskMembersOverridesAddresses(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{}
	etcd.Name, etcd.Namespace = "etcd-main", ns
	targets := []etcdclient.Target{
		{Name: "etcd-main-0", Address: "10.1.0.7:3379", ServerName: "etcd-main-0.etcd-main-peer.shoot.svc"},
		{Name: "etcd-main-1", Address: "10.1.0.8:3379", ServerName: "etcd-main-1.etcd-main-peer.shoot.svc"},
	}
	q := &recordingQuerier{}
	ask := AskMembers(q, conductortls.ClientMaterial{}, map[string]string{"etcd-main-1": "127.0.0.1:23791", "etcd-main-9": "127.0.0.1:1"})
	reports, err := ask(context.Background(), etcd, targets)
	if err == nil || len(reports) != 0 {
		t.Fatalf("AskMembers() = %v, %v; want the querier's error and no reports", reports, err)
	}
	want := []etcdclient.Target{
		targets[0],
		{Name: "etcd-main-1", Address: "127.0.0.1:23791", ServerName: "etcd-main-1.etcd-main-peer.shoot.svc"},
	}
	if q.cluster != "shoot/etcd-main" || !reflect.DeepEqual(q.targets, want) {
		t.Fatalf("queried %s with %+v, want shoot/etcd-main with %+v", q.cluster, q.targets, want)
	}
	if targets[1].Address != "10.1.0.8:3379" {
		t.Fatal("AskMembers changed the caller's targets")
	}
}
