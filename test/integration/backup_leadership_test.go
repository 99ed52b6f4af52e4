package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/s3server"
)

// TestBackupAcrossLeaderChanges runs the backup loop of all three members of a real etcd cluster
// at once (as the three member-agents do) against a real S3 server and real Leases, under writes,
// while leadership moves every second or so. Only the leader's loop works; the Leases' revisions
// never go down; and the store's latest chain, full snapshot plus deltas, holds every revision
// after the full snapshot without a gap, whoever wrote them.
func TestBackupAcrossLeaderChanges(t *testing.T) {
	env := sharedControlPlane(t)
	ns := testNamespace("backup-leaders")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := framework.CreateNamespace(ctx, env.Client(), ns, nil); err != nil {
		t.Fatal(err)
	}
	cluster := etcdtest.Start(t, etcdtest.Config{Members: 3})
	srv := s3server.StartT(t, "", "leaders")
	kube, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd-full-snap", "etcd-delta-snap"} {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if _, err := kube.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every revision a snapshot Lease records, in order.
	var leaseMu sync.Mutex
	recorded := map[string][]int64{}
	w, err := kube.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			lease, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || ev.Type != watch.Modified || lease.Spec.HolderIdentity == nil {
				continue
			}
			rev, err := strconv.ParseInt(*lease.Spec.HolderIdentity, 10, 64)
			if err != nil {
				continue
			}
			leaseMu.Lock()
			recorded[lease.Name] = append(recorded[lease.Name], rev)
			leaseMu.Unlock()
		}
	}()

	conns := make([]*etcdclient.MemberConn, len(cluster.Members))
	var wg sync.WaitGroup
	runCtx, stopRunners := context.WithCancel(ctx)
	for i, m := range cluster.Members {
		conn, err := etcdclient.DialMember(cluster.Client, m.Target(), etcdclient.Options{CallTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = conn
		t.Cleanup(func() { _ = conn.Close() })
		cfg := backup.Config{
			Store: backupstore.Flags{Provider: "S3", Container: "leaders", Prefix: "etcd", SecretDir: writeSecretDir(t, srv.SecretData()),
				Etcd: ns + "/etcd", EtcdUID: "uid-1"},
			SpoolDir: t.TempDir(), FullSchedule: "0 0 1 1 *",
			DeltaPeriod: 500 * time.Millisecond, FullLease: "etcd-full-snap", DeltaLease: "etcd-delta-snap",
			Namespace: ns, Tick: 100 * time.Millisecond,
		}
		runner, err := backup.NewRunner(cfg, conn, kube.CoordinationV1(), backup.NewMetrics(prometheus.NewRegistry()), logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); runner.Run(runCtx) }()
	}

	// Writes all along, through whichever member answers.
	kvConn, err := cluster.Dial(0)
	if err != nil {
		t.Fatal(err)
	}
	defer kvConn.Close()
	kv := pb.NewKVClient(kvConn)
	writes := make(chan struct{})
	go func() {
		defer close(writes)
		for n := 0; runCtx.Err() == nil; n++ {
			wctx, c := context.WithTimeout(runCtx, time.Second)
			_, _ = kv.Put(wctx, &pb.PutRequest{Key: fmt.Appendf(nil, "k/%05d", n%300), Value: fmt.Appendf(nil, "v%d", n)})
			c()
			time.Sleep(5 * time.Millisecond)
		}
	}()

	// Move leadership around, each time to the next member.
	moves := 0
	for moves < 6 {
		time.Sleep(1200 * time.Millisecond)
		leader, next := -1, -1
		var nextID uint64
		for i, c := range conns {
			st, err := c.Status(ctx)
			if err == nil && st.IsLeader() {
				leader = i
			}
		}
		if leader < 0 {
			continue
		}
		next = (leader + 1) % len(conns)
		st, err := conns[next].Status(ctx)
		if err != nil {
			continue
		}
		nextID = st.ID
		if err := conns[leader].MoveLeader(ctx, nextID); err != nil {
			t.Logf("move leader %d -> %d: %v", leader, next, err)
			continue
		}
		moves++
	}
	time.Sleep(2 * time.Second) // the last leader's loop takes a delta
	stopRunners()
	wg.Wait()
	<-writes

	leaseMu.Lock()
	for name, revs := range recorded {
		for i := 1; i < len(revs); i++ {
			if revs[i] < revs[i-1] {
				t.Errorf("lease %s went down from revision %d to %d (history %v)", name, revs[i-1], revs[i], revs)
			}
		}
		t.Logf("lease %s: %d updates, revisions %d..%d", name, len(revs), revs[0], revs[len(revs)-1])
	}
	if len(recorded["etcd-delta-snap"]) < 3 {
		t.Errorf("delta Lease updated %d times over %d leader changes", len(recorded["etcd-delta-snap"]), moves)
	}
	leaseMu.Unlock()

	store, err := backupstore.New(backupstore.Config{Provider: "S3", Container: "leaders", Prefix: "etcd", Secret: srv.SecretData()})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(ctx, snapshot.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	snaps, foreign := snapshot.ParseAll(keys)
	if len(foreign) > 0 {
		t.Errorf("objects that are no snapshots: %v", foreign)
	}
	chain, ok := snapshot.Latest(snaps)
	if !ok || chain.Gap != "" {
		t.Fatalf("latest chain %+v (ok %v) over %d objects", chain, ok, len(keys))
	}
	// Every revision after the full snapshot is in some delta of the chain.
	seen := map[int64]bool{}
	for _, d := range chain.Deltas {
		r, err := store.Get(ctx, d.Key())
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil {
			t.Fatal(err)
		}
		f, err := snapshot.DecodeDelta(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("delta %s: %v", d.Key(), err)
		}
		for _, e := range f.Events {
			seen[e.ModRevision] = true
		}
	}
	for rev := chain.Full.EndRevision + 1; rev <= chain.EndRevision(); rev++ {
		if !seen[rev] {
			t.Fatalf("revision %d (between the full snapshot at %d and the chain's end %d) is in no delta", rev, chain.Full.EndRevision, chain.EndRevision())
		}
	}
	t.Logf("%d leader changes; store: %d objects, latest %s + %d deltas up to revision %d, every revision present",
		moves, len(keys), chain.Full.Name(), len(chain.Deltas), chain.EndRevision())

	// The chain restores exactly, checked against the keyspace digest each leader carried on
	// from the one before (a leader that lost the count would leave the last delta without one).
	res, err := restore.FromStore(ctx, store, snapshot.Owner{Etcd: ns + "/etcd", EtcdUID: "uid-1"}, restore.Options{
		DataDir: filepath.Join(t.TempDir(), "restored.etcd"), Name: "etcd-0", PeerURL: "http://127.0.0.1:2380", Token: "t", Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != chain.EndRevision() || res.Stopped != "" || !strings.Contains(res.Checked, "digest") {
		t.Fatalf("restored %s; want revision %d, checked against the backup's digest", res, chain.EndRevision())
	}
	t.Logf("restored: %s", res)
}

// writeSecretDir lays a Secret's data out as a mounted Secret volume.
func writeSecretDir(t *testing.T, data map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
