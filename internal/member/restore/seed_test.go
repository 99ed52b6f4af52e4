package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// TestSeedJoiningLearner: a learner seeded from a full snapshot of its cluster catches up from
// the leader's log entries alone (no raft snapshot sent, a fraction of the database's bytes),
// and ends with the same keyspace; on etcd 3.6 and 3.7. Asked from its first moment, as the
// member-agent and the probes ask it, it answers or refuses but never stops (its membership is
// the snapshot's until it applies its own MemberAddAsLearner entry). Without the WAL and raft snapshot record
// Seed writes next to the database, the leader sends its whole database.
func TestSeedJoiningLearner(t *testing.T) {
	for _, version := range []string{"3.6.8", "3.7.3"} {
		t.Run(version, func(t *testing.T) {
			requireEtcd(t, version)
			j := startJoinCluster(t, version)
			j.fill(t, "data/", 256, 16<<10) // 4 MiB
			full := j.backup(t)
			j.fill(t, "after/", 300, 100)

			id := j.seedAndStart(t, full, nil)
			stop := j.askNewMember(t)
			j.promote(t, id)
			stop()
			sent, snaps := j.sentTo(t, id)
			if snaps != 0 || sent > 1<<20 {
				t.Fatalf("the leader sent %d raft snapshots and %d bytes to the seeded learner; want 0 and less than 1 MiB", int(snaps), int(sent))
			}
			j.hashesAgree(t)
		})
	}
}

// TestSeedTooFarBehindIsReplaced: a seed older than the leader's log (more than
// --snapshot-catchup-entries behind) is replaced by the leader's snapshot, as an empty member is
// caught up: seeding a stale snapshot costs the download, never the data.
func TestSeedTooFarBehindIsReplaced(t *testing.T) {
	requireEtcd(t, etcdtest.DefaultVersion)
	j := startJoinCluster(t, etcdtest.DefaultVersion, "--experimental-snapshot-catchup-entries=100")
	j.fill(t, "data/", 64, 16<<10)
	full := j.backup(t)
	j.fill(t, "after/", 400, 100)

	id := j.seedAndStart(t, full, nil)
	j.promote(t, id)
	if _, snaps := j.sentTo(t, id); snaps != 1 {
		t.Fatalf("the leader sent %d raft snapshots to a learner seeded behind its log, want 1", int(snaps))
	}
	j.hashesAgree(t)
}

// TestSeedDeclinedLeavesNoMemberDir: a seed its decide callback refuses, or whose snapshot is not
// a database, leaves the data dir as an empty member's.
func TestSeedDeclinedLeavesNoMemberDir(t *testing.T) {
	requireEtcd(t, etcdtest.DefaultVersion)
	j := startJoinCluster(t, etcdtest.DefaultVersion)
	j.fill(t, "data/", 16, 100)
	full := j.backup(t)
	dir := filepath.Join(t.TempDir(), "data")
	_, err := Seed(context.Background(), SeedOptions{Full: full, Open: j.open, DataDir: dir,
		Target: SeedTarget{MemberID: 0x1234, ClusterID: j.clusterID},
		Decide: func(SeedPoint) error { return errors.New("too far behind") }, Log: testr.New(t)})
	if !errors.Is(err, ErrSeedDeclined) {
		t.Fatalf("Seed = %v, want ErrSeedDeclined", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "member")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a declined seed left %s/member (%v)", dir, err)
	}
	if _, err := Seed(context.Background(), SeedOptions{Full: snapshot.Full(1, time.Now()), Open: j.open, DataDir: dir,
		Target: SeedTarget{MemberID: 0x1234, ClusterID: j.clusterID}, Log: testr.New(t), Retry: Retry{Attempts: 1}}); err == nil {
		t.Fatal("Seed from a missing snapshot succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "member")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed seed left %s/member (%v)", dir, err)
	}
}

func requireEtcd(t *testing.T, version string) {
	t.Helper()
	if _, err := etcdtest.EtcdBinary(version); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("etcd binary required under CI=true: %v", err)
		}
		t.Skipf("etcd binary not built: %v", err)
	}
}

type joinCluster struct {
	c         *etcdtest.Cluster
	leader    int
	lc        *etcdclient.MemberConn
	store     backupstore.Store
	clusterID uint64
}

func startJoinCluster(t *testing.T, version string, extraArgs ...string) *joinCluster {
	c := etcdtest.Start(t, etcdtest.Config{Members: 3, Version: version, EtcdName: "seed", ExtraArgs: extraArgs})
	j := &joinCluster{c: c, leader: -1}
	ctx := context.Background()
	for i := range c.Members {
		mc, err := c.MemberConn(i, etcdclient.Options{CallTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := mc.Status(ctx); err == nil && st.IsLeader() {
			j.leader, j.lc, j.clusterID = i, mc, st.ClusterID
		}
	}
	if j.leader < 0 {
		t.Fatal("no leader")
	}
	store, err := backupstore.NewLocal(t.TempDir(), "bucket", "seed")
	if err != nil {
		t.Fatal(err)
	}
	j.store = store
	return j
}

func (j *joinCluster) open(ctx context.Context, key string) (io.ReadCloser, error) {
	return j.store.Get(ctx, key)
}

func (j *joinCluster) fill(t *testing.T, prefix string, n, size int) {
	t.Helper()
	cc, err := j.c.Dial(j.leader)
	if err != nil {
		t.Fatal(err)
	}
	kv := pb.NewKVClient(cc)
	value := []byte(strings.Repeat("v", size))
	for k := range n {
		if _, err := kv.Put(context.Background(), &pb.PutRequest{Key: fmt.Appendf(nil, "%s%06d", prefix, k), Value: value}); err != nil {
			t.Fatal(err)
		}
	}
}

// backup uploads a full snapshot from a follower, as the backup loop does.
func (j *joinCluster) backup(t *testing.T) snapshot.Snapshot {
	t.Helper()
	mc, err := j.c.MemberConn((j.leader+1)%3, etcdclient.Options{CallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	full, _, err := backup.UploadFull(context.Background(), mc, j.store, t.TempDir(), time.Now(), snapshot.CompressionGzip)
	if err != nil {
		t.Fatal(err)
	}
	return full
}

// seedAndStart adds a learner, seeds its data dir from full and starts it.
func (j *joinCluster) seedAndStart(t *testing.T, full snapshot.Snapshot, decide func(SeedPoint) error) uint64 {
	t.Helper()
	ctx := context.Background()
	m, err := j.c.NewJoiningMember()
	if err != nil {
		t.Fatal(err)
	}
	var added etcdclient.Member
	deadline := time.Now().Add(time.Minute)
	for {
		added, _, err = j.lc.AddLearner(ctx, []string{m.PeerURL})
		if err == nil {
			break
		}
		if !etcdclient.IsUnhealthyCluster(err) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	res, err := Seed(ctx, SeedOptions{Full: full, Open: j.open, DataDir: m.DataDir,
		Target: SeedTarget{MemberID: added.ID, ClusterID: j.clusterID}, Decide: decide, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", res)
	if err := j.c.StartMember(len(j.c.Members) - 1); err != nil {
		t.Fatal(err)
	}
	return added.ID
}

// askNewMember asks the newest member for its status and /readyz without pause, as the
// member-agent and the kubelet's probes do from the start, until the returned stop is called;
// stop fails the test if the member is no longer running.
func (j *joinCluster) askNewMember(t *testing.T) (stop func()) {
	t.Helper()
	i := len(j.c.Members) - 1
	m := j.c.Members[i]
	mc, err := j.c.MemberConn(i, etcdclient.Options{CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := j.c.Client.ConfigOrPlain(m.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: time.Second}
	done := make(chan struct{})
	finished := make(chan int)
	go func() {
		asked := 0
		for {
			select {
			case <-done:
				finished <- asked
				return
			default:
			}
			_, _ = mc.Status(context.Background())
			if resp, err := client.Get(m.ClientURL + "/readyz"); err == nil {
				resp.Body.Close()
			}
			asked++
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() {
		close(done)
		asked := <-finished
		if !j.c.Running(i) {
			log, _ := os.ReadFile(m.LogFile)
			t.Fatalf("the seeded member stopped while asked (%d times):\n%s", asked, log[max(0, len(log)-3000):])
		}
		t.Logf("the seeded member answered or refused %d status and readyz requests while catching up", asked)
	}
}

func (j *joinCluster) promote(t *testing.T, id uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := j.lc.Promote(context.Background(), id)
		if err == nil {
			return
		}
		if !etcdclient.IsLearnerNotReady(err) || time.Now().After(deadline) {
			m := j.c.Members[len(j.c.Members)-1]
			log, _ := os.ReadFile(m.LogFile)
			t.Fatalf("promoting %s: %v\n%s", m.Name, err, log[max(0, len(log)-3000):])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sentTo reads the leader's peer traffic counters for member id.
func (j *joinCluster) sentTo(t *testing.T, id uint64) (bytes, snapshots float64) {
	t.Helper()
	bytes, snapshots, err := j.c.SentTo(j.leader, id)
	if err != nil {
		t.Fatal(err)
	}
	return bytes, snapshots
}

// hashesAgree waits until every member's KV hash at the leader's revision is the leader's.
func (j *joinCluster) hashesAgree(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	st, err := j.lc.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hash := func(i int) (uint32, error) {
		cc, err := j.c.Dial(i)
		if err != nil {
			return 0, err
		}
		resp, err := pb.NewMaintenanceClient(cc).HashKV(ctx, &pb.HashKVRequest{Revision: st.Revision})
		if err != nil {
			return 0, err
		}
		return resp.Hash, nil
	}
	want, err := hash(j.leader)
	if err != nil {
		t.Fatal(err)
	}
	for i := range j.c.Members {
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := hash(i)
			if err == nil && got == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %s: hash %x (%v) at revision %d, the leader's is %x", j.c.Members[i].Name, got, err, st.Revision, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
