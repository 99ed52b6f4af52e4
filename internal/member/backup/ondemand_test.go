package backup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// TestRunnerAnswersOnDemandRequests runs the backup loop step by step against a real etcd member,
// a Local store and Leases (a fake clientset): a delta request on the delta Lease is answered by
// a delta at once, though no delta period is set, and recorded handled with the delta's revision
// and object; a delta request with nothing written since is answered by the record that nothing
// changed; a full request on the full Lease by a full snapshot.
func TestRunnerAnswersOnDemandRequests(t *testing.T) {
	if _, err := etcdtest.EtcdBinary(etcdtest.DefaultVersion); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster := etcdtest.Start(t, etcdtest.Config{Members: 1})
	member, err := cluster.MemberConn(0, etcdclient.Options{CallTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := cluster.Dial(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	kv := pb.NewKVClient(conn)
	put := func(n int) int64 {
		t.Helper()
		var rev int64
		for i := range n {
			resp, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "k/%03d", i), Value: fmt.Appendf(nil, "v%d-%d", i, time.Now().UnixNano())})
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}

	const ns, fullLease, deltaLease = "ns", "e-full-snap", "e-delta-snap"
	kube := fake.NewClientset(
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fullLease}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: deltaLease}})
	leases := kube.CoordinationV1().Leases(ns)
	flags := backupstore.Flags{Provider: "Local", Container: "backups", Prefix: "e", LocalRoot: t.TempDir(), Etcd: ns + "/e", EtcdUID: "uid-1"}
	runner, err := backup.NewRunner(backup.Config{
		Store: flags, SpoolDir: t.TempDir(), FullSchedule: "0 0 1 1 *", // deltas only on demand, full snapshots once a year
		FullLease: fullLease, DeltaLease: deltaLease, Namespace: ns,
	}, member, kube.CoordinationV1(), backup.NewMetrics(prometheus.NewRegistry()), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	store, err := flags.Open()
	if err != nil {
		t.Fatal(err)
	}
	request := func(lease, annotation, value string) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotation: value}}})
		if _, err := leases.Patch(ctx, lease, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(lease string) memberlease.SnapshotLeaseRecord {
		t.Helper()
		l, err := leases.Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return memberlease.ParseSnapshotLease(l.Spec.HolderIdentity, l.Spec.RenewTime, l.Annotations)
	}
	exists := func(key string) {
		t.Helper()
		s, err := snapshot.Parse(key)
		if err != nil {
			t.Fatalf("Lease names %q, which is no snapshot: %v", key, err)
		}
		if _, err := store.Stat(ctx, s.Key()); err != nil {
			t.Fatalf("the Lease's snapshot %s is not in the store: %v", key, err)
		}
	}

	put(10)
	runner.Step(ctx) // the first full snapshot
	first := read(fullLease)
	if first.Key == "" {
		t.Fatalf("no full snapshot after the first step: %+v", first)
	}

	// A delta on demand, with writes since the full snapshot.
	rev := put(20)
	request(deltaLease, memberlease.AnnotationDeltaSnapshotRequest, "task/1")
	runner.Step(ctx)
	got := read(deltaLease)
	if got.DeltaHandled != "task/1" || got.Revision != rev || got.Error != "" {
		t.Fatalf("after a delta request: delta Lease %+v, want task/1 handled at revision %d", got, rev)
	}
	if s, _ := snapshot.Parse(got.Key); s.Kind != snapshot.KindDelta || s.EndRevision != rev {
		t.Fatalf("the delta Lease names %q, want a delta ending at revision %d", got.Key, rev)
	}
	exists(got.Key)

	// Answered once: the next step takes nothing.
	runner.Step(ctx)
	if again := read(deltaLease); again.Key != got.Key || !again.Time.Equal(got.Time) {
		t.Fatalf("a handled request was answered again: %+v after %+v", again, got)
	}

	// Nothing written since: answered by the record that the backup is current.
	request(deltaLease, memberlease.AnnotationDeltaSnapshotRequest, "task/2")
	runner.Step(ctx)
	if idle := read(deltaLease); idle.DeltaHandled != "task/2" || idle.Revision != rev {
		t.Fatalf("a delta request with nothing new: %+v, want task/2 handled at revision %d", idle, rev)
	}

	// A full snapshot on demand.
	rev = put(5)
	request(fullLease, memberlease.AnnotationFullSnapshotRequest, "task/3")
	runner.Step(ctx)
	full := read(fullLease)
	if full.Handled != "task/3" || full.Revision != rev {
		t.Fatalf("after a full request: full Lease %+v, want task/3 handled at revision %d", full, rev)
	}
	if s, _ := snapshot.Parse(full.Key); s.Kind != snapshot.KindFull {
		t.Fatalf("the full Lease names %q, want a full snapshot", full.Key)
	}
	exists(full.Key)
}
