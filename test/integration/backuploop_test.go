package integration

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// backupLoop is a real one-member etcd cluster named name and the backup loop its member-agent
// would run (in this process), writing to store with the cluster's two snapshot Leases
// (<name>-full-snap, <name>-delta-snap) in namespace ns: real full and delta snapshots of real
// writes. Its full snapshots are taken at start and on request; its deltas every 300ms.
func startBackupLoop(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns, name string, store backupstore.Flags) *etcdtest.Cluster {
	t.Helper()
	for _, l := range []string{name + "-full-snap", name + "-delta-snap"} {
		if _, err := kube.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: l}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := etcdtest.Start(t, etcdtest.Config{Members: 1, EtcdName: name})
	conn, err := c.MemberConn(0, etcdclient.Options{CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := backup.NewRunner(backup.Config{
		Store:        store,
		SpoolDir:     t.TempDir(),
		FullSchedule: "0 0 1 1 *", DeltaPeriod: 300 * time.Millisecond, FullLease: name + "-full-snap", DeltaLease: name + "-delta-snap",
		Namespace: ns, Tick: 100 * time.Millisecond,
	}, conn, kube.CoordinationV1(), backup.NewMetrics(prometheus.NewRegistry()), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	go runner.Run(ctx)
	return c
}
