package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// source is a real etcd member (mTLS) whose history the tests back up by hand: a full snapshot
// through Maintenance.Snapshot, deltas from a watch, as the backup sidecar does.
type source struct {
	conn    *grpc.ClientConn
	member  *etcdclient.MemberConn
	kv      clientv3.KV
	watch   clientv3.Watcher
	maint   pb.MaintenanceClient
	objects map[string][]byte
	// fullRev is the revision of the full snapshot.
	fullRev int64
}

func startSource(t *testing.T) *source { return startSourceVersion(t, etcdtest.DefaultVersion) }

func startSourceTB(t testing.TB) *source { return startSourceVersion(t, etcdtest.DefaultVersion) }

func startSourceVersion(t testing.TB, version string) *source {
	t.Helper()
	return startSourceWith(t, etcdtest.Config{Members: 1, Version: version})
}

func startSourceWith(t testing.TB, cfg etcdtest.Config) *source {
	t.Helper()
	if cfg.Version == "" {
		cfg.Version = etcdtest.DefaultVersion
	}
	if _, err := etcdtest.EtcdBinary(cfg.Version); err != nil {
		t.Skip(err)
	}
	c := etcdtest.Start(t, cfg)
	cc, err := c.Dial(0)
	if err != nil {
		t.Fatal(err)
	}
	member, err := c.MemberConn(0, etcdclient.Options{CallTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w := clientv3.NewWatchFromWatchClient(pb.NewWatchClient(cc), nil)
	t.Cleanup(func() { w.Close() })
	return &source{conn: cc, member: member, kv: clientv3.NewKVFromKVClient(pb.NewKVClient(cc), nil), watch: w,
		maint: pb.NewMaintenanceClient(cc), objects: map[string][]byte{}}
}

// write puts n keys under prefix, deletes every fifth and runs one multi-key transaction.
func (s *source) write(ctx context.Context, t testing.TB, prefix string, n int) int64 {
	t.Helper()
	for i := range n {
		if _, err := s.kv.Put(ctx, fmt.Sprintf("%s/%04d", prefix, i), fmt.Sprintf("value-%d-%s", i, bytes.Repeat([]byte("x"), i%100))); err != nil {
			t.Fatal(err)
		}
		if i%5 == 4 {
			if _, err := s.kv.Delete(ctx, fmt.Sprintf("%s/%04d", prefix, i-2)); err != nil {
				t.Fatal(err)
			}
		}
	}
	resp, err := s.kv.Txn(ctx).Then(clientv3.OpPut(prefix+"/txn-a", "a"), clientv3.OpPut(prefix+"/txn-b", "b"),
		clientv3.OpDelete(fmt.Sprintf("%s/%04d", prefix, 0))).Commit()
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func (s *source) full(ctx context.Context, t testing.TB) snapshot.Snapshot {
	t.Helper()
	resp, err := s.kv.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := s.maint.Snapshot(ctx, &pb.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, chunk.Blob...)
	}
	s.fullRev = resp.Header.Revision
	snap := snapshot.Full(s.fullRev, time.Now())
	s.objects[snap.Key()] = data
	return snap
}

// delta records the events of revisions from..to as one delta object, as the backup loop
// does (backup.BuildDelta): with the writer's origin and its count of the keyspace at to.
func (s *source) delta(ctx context.Context, t testing.TB, from, to int64) snapshot.Snapshot {
	t.Helper()
	ds := s.deltas(ctx, t, from, to)
	if len(ds) != 1 {
		t.Fatalf("revisions %d..%d make %d deltas (backup.MaxDeltaBytes), want one", from, to, len(ds))
	}
	return ds[0]
}

// deltas records revisions from..to as the backup loop does, in as many deltas as
// backup.MaxDeltaBytes makes of them.
func (s *source) deltas(ctx context.Context, t testing.TB, from, to int64) []snapshot.Snapshot {
	t.Helper()
	var out []snapshot.Snapshot
	var keyspace *snapshot.Accumulator
	for from <= to {
		f, next, err := backup.BuildDelta(ctx, s.member, from, to, keyspace, &snapshot.Origin{ClusterID: s.clusterID(ctx, t)})
		if err != nil {
			t.Fatal(err)
		}
		if f.End == nil {
			t.Fatalf("delta %d..%d: the writer could not count the keyspace", from, f.EndRevision)
		}
		out = append(out, s.put(t, snapshot.Delta(from, f.EndRevision, time.Now()), f))
		from, keyspace = f.EndRevision+1, next
	}
	return out
}

// put stores f as delta object snap.
func (s *source) put(t testing.TB, snap snapshot.Snapshot, f snapshot.DeltaFile) snapshot.Snapshot {
	t.Helper()
	var buf bytes.Buffer
	if err := snapshot.EncodeDeltaFile(&buf, f); err != nil {
		t.Fatal(err)
	}
	s.objects[snap.Key()] = buf.Bytes()
	return snap
}

func (s *source) clusterID(ctx context.Context, t testing.TB) string {
	t.Helper()
	st, err := s.member.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", st.ClusterID)
}

func (s *source) leaseClient() pb.LeaseClient { return pb.NewLeaseClient(s.conn) }

func (s *source) revision(ctx context.Context, t testing.TB) int64 {
	t.Helper()
	resp, err := s.kv.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func (s *source) open(_ context.Context, key string) (io.ReadCloser, error) {
	data, ok := s.objects[key]
	if !ok {
		return nil, fmt.Errorf("object %s: %w", key, os.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// keysAt is every key and value of the source at revision rev.
func (s *source) keysAt(ctx context.Context, t testing.TB, rev int64) map[string]string {
	t.Helper()
	resp, err := s.kv.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	return kvs(resp)
}

func kvs(resp *clientv3.GetResponse) map[string]string {
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// startRestored runs etcd's server on the restored data dir (loopback only) and returns every
// key, the revision and the cluster ID it serves.
func startRestored(ctx context.Context, t *testing.T, dir, name, peerURL string) (map[string]string, int64, uint64) {
	t.Helper()
	return startRestoredThen(ctx, t, dir, name, peerURL, nil)
}

// startRestoredThen is startRestored, handing the running member's client to also first.
func startRestoredThen(ctx context.Context, t *testing.T, dir, name, peerURL string, also func(*clientv3.Client)) (map[string]string, int64, uint64) {
	t.Helper()
	peer, _ := url.Parse(peerURL)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cli := url.URL{Scheme: "http", Host: l.Addr().String()}
	l.Close()
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cli}, []url.URL{cli}
	cfg.InitialCluster = name + "=" + peerURL
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("restored member not ready")
	}
	c := v3client.New(e.Server)
	defer c.Close()
	if also != nil {
		also(c)
	}
	resp, err := c.Get(ctx, "\x00", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	return kvs(resp), resp.Header.Revision, uint64(e.Server.Cluster().ID())
}

func loopbackPeerURL(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

func sameKeys(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("restored %d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %s: restored %q, want %q", k, got[k], v)
			return
		}
	}
}

func TestRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := startSource(t)
	src.write(ctx, t, "before", 200)
	full := src.full(ctx, t)
	mid := src.write(ctx, t, "delta1", 60)
	d1 := src.delta(ctx, t, full.EndRevision+1, mid)
	end := src.write(ctx, t, "delta2", 60)
	d2 := src.delta(ctx, t, mid+1, end)

	corrupt := snapshot.Delta(d2.StartRevision, d2.EndRevision, d2.CreatedOn.Add(time.Second))
	d2data := src.objects[d2.Key()]
	src.objects[corrupt.Key()] = d2data[:len(d2data)/2] // an upload cut short
	missing := snapshot.Delta(d2.StartRevision, d2.EndRevision, d2.CreatedOn.Add(2*time.Second))

	for _, tc := range []struct {
		name    string
		chain   snapshot.Chain
		wantRev int64
		stopped bool
		wantErr bool
	}{
		{name: "full snapshot only", chain: snapshot.Chain{Full: full}, wantRev: full.EndRevision},
		{name: "full snapshot and two deltas", chain: snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{d1, d2}}, wantRev: end},
		{name: "corrupt second delta stops at the first", chain: snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{d1, corrupt}}, wantRev: mid, stopped: true},
		// Listed, yet the store does not send it: nothing proves it damaged, so the restore
		// fails (and is tried again on a fresh listing) rather than start without it.
		{name: "missing second delta is an error, not an early stop", chain: snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{d1, missing}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "new.etcd")
			peer := loopbackPeerURL(t)
			res, err := Restore(ctx, Options{Chain: tc.chain, Open: src.open, DataDir: dir, Name: "etcd-0", PeerURL: peer, Token: "restored", Log: testr.New(t)})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("restored %s; want an error", res)
				}
				if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
					t.Errorf("a failed restore left %s: %v", dir, statErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("restored: %s", res)
			if res.Revision != tc.wantRev || (res.Stopped != "") != tc.stopped {
				t.Fatalf("revision %d stopped %q, want revision %d stopped=%v", res.Revision, res.Stopped, tc.wantRev, tc.stopped)
			}
			got, rev, _ := startRestored(ctx, t, dir, "etcd-0", peer)
			if rev != tc.wantRev {
				t.Errorf("restored member serves revision %d, want %d (the source's)", rev, tc.wantRev)
			}
			sameKeys(t, got, src.keysAt(ctx, t, tc.wantRev))
			if _, err := os.Stat(dir + ".restore-work"); !os.IsNotExist(err) {
				t.Errorf("scratch dir left behind: %v", err)
			}
		})
	}

	t.Run("latest chain from a Local store", func(t *testing.T) {
		store, err := backupstore.NewLocal(t.TempDir(), "backups", "etcd-main")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []snapshot.Snapshot{full, d1, d2} {
			data := src.objects[s.Key()]
			if _, err := store.Put(ctx, s.Key(), bytes.NewReader(data), int64(len(data)), backupstore.SHA256Hex(data)); err != nil {
				t.Fatal(err)
			}
		}
		dir := filepath.Join(t.TempDir(), "new.etcd")
		peer := loopbackPeerURL(t)
		res, err := FromStore(ctx, store, snapshot.Owner{}, Options{DataDir: dir, Name: "etcd-1", PeerURL: peer, Token: "t", Log: testr.New(t)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Revision != end || res.DeltasApplied != 2 {
			t.Fatalf("restored %s, want revision %d with 2 deltas", res, end)
		}
		got, _, _ := startRestored(ctx, t, dir, "etcd-1", peer)
		sameKeys(t, got, src.keysAt(ctx, t, end))
	})

	// The init step's view of an outage (S3 answering SlowDown to delta reads, for any length of
	// time): every attempt fails and leaves nothing, however many polls it lasts; the first after
	// it restores every delta.
	t.Run("a store outage longer than the retries: every attempt fails, then every delta restores", func(t *testing.T) {
		local, err := backupstore.NewLocal(t.TempDir(), "backups", "etcd-main")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []snapshot.Snapshot{full, d1, d2} {
			data := src.objects[s.Key()]
			if _, err := local.Put(ctx, s.Key(), bytes.NewReader(data), int64(len(data)), backupstore.SHA256Hex(data)); err != nil {
				t.Fatal(err)
			}
		}
		store := &deltaOutage{Store: local, down: true}
		dir := filepath.Join(t.TempDir(), "new.etcd")
		peer := loopbackPeerURL(t)
		o := Options{DataDir: dir, Name: "etcd-1", PeerURL: peer, Token: "t", Log: testr.New(t), Retry: Retry{Attempts: 2, First: time.Millisecond, Max: time.Millisecond}}
		for poll := range 3 {
			if res, err := FromStore(ctx, store, snapshot.Owner{}, o); err == nil {
				t.Fatalf("poll %d during the outage restored %s; want an error", poll, res)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("poll %d left %s: %v", poll, dir, err)
			}
		}
		store.down = false
		res, err := FromStore(ctx, store, snapshot.Owner{}, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Revision != end || res.DeltasApplied != 2 || res.Stopped != "" {
			t.Fatalf("restored %s after the outage, want revision %d with 2 deltas", res, end)
		}
	})

	t.Run("empty store", func(t *testing.T) {
		store, err := backupstore.NewLocal(t.TempDir(), "backups", "none")
		if err != nil {
			t.Fatal(err)
		}
		_, err = FromStore(ctx, store, snapshot.Owner{}, Options{DataDir: filepath.Join(t.TempDir(), "new.etcd"), Name: "etcd-0", PeerURL: loopbackPeerURL(t), Token: "t"})
		if !errors.Is(err, ErrNoFullSnapshot) {
			t.Fatalf("error %v, want ErrNoFullSnapshot", err)
		}
	})

	// etcd's documented restore for Kubernetes: the member starts far above every revision the
	// old cluster may have served after its last backup, the history below compacted, so a
	// client watching from such a revision is told to list afresh instead of missing changes.
	t.Run("revision bumped and marked compacted", func(t *testing.T) {
		const bump = 1000
		dir := filepath.Join(t.TempDir(), "new.etcd")
		peer := loopbackPeerURL(t)
		chain := snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{d1, d2}}
		res, err := Restore(ctx, Options{Chain: chain, Open: src.open, DataDir: dir, Name: "etcd-0", PeerURL: peer, Token: "restored", Log: testr.New(t), RevisionBump: bump})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("restored: %s", res)
		if res.Revision != end || res.ServedRevision != end+bump || res.Keys != len(src.keysAt(ctx, t, end)) {
			t.Fatalf("revision %d served %d keys %d; want %d, %d and %d keys", res.Revision, res.ServedRevision, res.Keys, end, end+bump, len(src.keysAt(ctx, t, end)))
		}
		got, rev, _ := startRestoredThen(ctx, t, dir, "etcd-0", peer, func(c *clientv3.Client) {
			// A watcher that saw a revision the old cluster served after the backup.
			w := c.Watch(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(end+bump/2))
			select {
			case resp := <-w:
				if resp.CompactRevision != end+bump {
					t.Errorf("a watch from revision %d got compact revision %d (err %v); want it compacted at %d", end+bump/2, resp.CompactRevision, resp.Err(), end+bump)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("a watch from revision %d below the bump was not told it is compacted", end+bump/2)
			}
			if _, err := c.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(end)); err == nil {
				t.Errorf("read at the backup's revision %d succeeded; want it compacted", end)
			}
		})
		if rev != end+bump {
			t.Errorf("restored member serves revision %d, want %d", rev, end+bump)
		}
		sameKeys(t, got, src.keysAt(ctx, t, end))
	})

	t.Run("a member directory of empty directories is no data", func(t *testing.T) {
		// The init step judges such a data dir Empty, and recovery counts it as proven lost:
		// the restore must then not refuse it (it did, at every poll).
		dir := filepath.Join(t.TempDir(), "new.etcd")
		if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "member", "snap"), 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := Restore(ctx, Options{Chain: snapshot.Chain{Full: full}, Open: src.open, DataDir: dir, Name: "etcd-0", PeerURL: loopbackPeerURL(t), Token: "x"}); err != nil {
			t.Fatalf("refused a data dir judged empty: %v", err)
		}
	})

	t.Run("never over data", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "new.etcd")
		if err := os.MkdirAll(filepath.Join(dir, "member", "wal"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "member", "wal", "0000000000000000-0000000000000000.wal"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Restore(ctx, Options{Chain: snapshot.Chain{Full: full}, Open: src.open, DataDir: dir, Name: "etcd-0", PeerURL: loopbackPeerURL(t), Token: "x"})
		if err == nil {
			t.Fatal("restored over member data")
		}
		if _, err := os.Stat(filepath.Join(dir, "member", "wal", "0000000000000000-0000000000000000.wal")); err != nil {
			t.Errorf("the existing data was touched: %v", err)
		}
	})
}

// dbVersions reads the storage schema and cluster versions a database records.
func dbVersions(t *testing.T, db string) (storage, cluster string) {
	t.Helper()
	lg := zap.NewNop()
	be := backend.NewDefaultBackend(lg, db)
	defer be.Close()
	v, err := schema.DetectSchemaVersion(lg, be.ReadTx())
	if err != nil {
		t.Fatal(err)
	}
	cluster = "unset"
	if c := schema.NewMembershipBackend(lg, be).ClusterVersionFromBackend(); c != nil {
		cluster = c.String()
	}
	return v.String(), cluster
}

// TestRestoreKeepsTheBackupsVersions: the deltas are replayed by the etcd storage layer this
// binary embeds (3.7), yet a backup of a 3.6 member must restore into data a 3.6 member starts
// from.
func TestRestoreKeepsTheBackupsVersions(t *testing.T) {
	const version = "3.6.8"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := startSourceVersion(t, version)
	src.write(ctx, t, "before", 50)
	full := src.full(ctx, t)
	end := src.write(ctx, t, "after", 50)
	d := src.delta(ctx, t, full.EndRevision+1, end)
	dir := filepath.Join(t.TempDir(), "new.etcd")
	peer := loopbackPeerURL(t)
	res, err := Restore(ctx, Options{Chain: snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{d}}, Open: src.open, DataDir: dir, Name: "etcd-0", PeerURL: peer, Token: "t", Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	storage, cluster := dbVersions(t, filepath.Join(dir, "member", "snap", "db"))
	if storage != "3.6.0" || cluster != "3.6.0" {
		t.Errorf("restored storage %s, cluster %s; want both 3.6.0 (the backup's)", storage, cluster)
	}
	// The member's own etcd starts from it (loopback, plain: only this test talks to it).
	binary, _ := etcdtest.EtcdBinary(version)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client := "http://" + l.Addr().String()
	l.Close()
	cmd := exec.CommandContext(ctx, binary, "--name=etcd-0", "--data-dir="+dir, "--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--listen-client-urls="+client, "--advertise-client-urls="+client, "--initial-cluster=etcd-0="+peer)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got *clientv3.GetResponse
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		got, err = c.Get(rctx, "\x00", clientv3.WithFromKey())
		rcancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("etcd %s did not serve the restored data: %v\n%s", version, err, out.String())
	}
	if got.Header.Revision != res.Revision {
		t.Errorf("etcd %s serves revision %d, restored %d", version, got.Header.Revision, res.Revision)
	}
	sameKeys(t, kvs(got), src.keysAt(ctx, t, end))
}

// deltaOutage is a store that answers everything but delta reads while down, as an S3 server
// throttling (503 SlowDown) or a proxy refusing them.
type deltaOutage struct {
	backupstore.Store
	down bool
}

func (d *deltaOutage) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if d.down && strings.Contains(key, "Incr-") {
		return nil, fmt.Errorf("get %s: 503 SlowDown: please reduce your request rate", key)
	}
	return d.Store.Get(ctx, key)
}
