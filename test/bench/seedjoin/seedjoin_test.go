package seedjoin

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
)

var (
	sizesFlag = flag.String("seedjoin.sizes", "", "keyspace sizes in MB, comma separated (e.g. 200,1024); empty skips the benchmark")
	// raft-stale first: after the raft snapshots of empty and db-only, a leader was seen keeping
	// more of its log than --snapshot-catchup-entries (docs/benchmarks.md).
	modesFlag   = flag.String("seedjoin.modes", "raft-stale,raft,empty,db-only", "how joining members' data directories are prepared")
	versionFlag = flag.String("seedjoin.version", etcdtest.DefaultVersion, "etcd version of every member")
	churnFlag   = flag.Int("seedjoin.churn", 1000, "puts between the full snapshot and the scale-out")
	staleFlag   = flag.Int("seedjoin.stale-churn", 8000, "puts between the full snapshot and the scale-out in mode raft-stale: more than the leader keeps (the last 5000 entries, --snapshot-catchup-entries, compacted every 100)")
	tmpFlag     = flag.String("seedjoin.tmp", os.TempDir(), "where the snapshot file and the members' data go (GBs at 1 GB)")
)

const (
	fillValueBytes  = 16 << 10
	churnValueBytes = 256
	writers         = 8
	joinTimeout     = 5 * time.Minute
)

// joinFigures is one scale-out 3→5: both joins together.
type joinFigures struct {
	sizeMB          int
	mode            string
	dbBytes         int64
	seedPrep        time.Duration // copying the snapshot and writing the raft state, both members
	join            time.Duration // from preparing the first member to the second promoted
	leaderSent      float64       // bytes the leader sent to the two new members (raft streams + snapshots)
	snapshotsSent   float64       // raft snapshots the leader sent them
	leaderCPU       time.Duration // the leader's CPU time over the scale-out
	hashesAgree     bool
	seedIndexBehind uint64 // entries between the seed point and the leader's index at the join
}

// TestScaleOutSeeding is the benchmark: a 3-member cluster filled to each size, then for each
// mode a full snapshot, churn, and a scale-out 3→5 (two learners, one at a time, each promoted
// once etcd's gate lets it), the two added members removed again before the next mode. It
// prints the figures side by side. Run it with make bench-seed.
func TestScaleOutSeeding(t *testing.T) {
	if *sizesFlag == "" {
		t.Skip("benchmark: give -seedjoin.sizes (make bench-seed)")
	}
	var rows []joinFigures
	for _, s := range strings.Split(*sizesFlag, ",") {
		mb, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			t.Fatalf("size %q: %v", s, err)
		}
		t.Run(fmt.Sprintf("%dMB", mb), func(t *testing.T) {
			rows = append(rows, runSize(t, mb)...)
		})
	}
	t.Logf("\n%s", table(rows))
}

func runSize(t *testing.T, mb int) []joinFigures {
	ctx := context.Background()
	c := etcdtest.Start(tempTB{t}, etcdtest.Config{Members: 3, Version: *versionFlag, EtcdName: "seed"})
	kv := pb.NewKVClient(dial(t, c, 0))
	start := time.Now()
	fill(ctx, t, kv, "fill/", mb<<20/fillValueBytes, fillValueBytes)
	t.Logf("%d MB written in %v", mb, time.Since(start).Round(time.Second))
	var rows []joinFigures
	for _, mode := range strings.Split(*modesFlag, ",") {
		f := scaleOut(ctx, t, c, mb, mode)
		t.Logf("%+v", f)
		rows = append(rows, f)
	}
	return rows
}

// scaleOut takes a full snapshot, writes churn, adds two members prepared as mode says, then
// removes them again.
func scaleOut(ctx context.Context, t *testing.T, c *etcdtest.Cluster, mb int, mode string) joinFigures {
	leader := leaderIndex(ctx, t, c)
	db := takeSnapshot(ctx, t, c, leader)
	defer os.Remove(db)
	churn := *churnFlag
	if mode == "raft-stale" {
		churn = *staleFlag
	}
	kv := pb.NewKVClient(dial(t, c, leader))
	fill(ctx, t, kv, fmt.Sprintf("churn/%s/", mode), churn, churnValueBytes)

	f := joinFigures{sizeMB: mb, mode: mode, hashesAgree: true}
	if st, err := os.Stat(db); err == nil {
		f.dbBytes = st.Size()
	}
	cpuBefore := cpuTime(t, c.Members[leader].PID())
	var added []uint64
	for range 2 {
		id, prep, joined, behind := join(ctx, t, c, leader, db, mode)
		added = append(added, id)
		f.seedPrep += prep
		f.join += joined
		f.seedIndexBehind = max(f.seedIndexBehind, behind)
	}
	f.leaderCPU = cpuTime(t, c.Members[leader].PID()) - cpuBefore
	// The counters are per peer, and the peers are new: what they hold is the scale-out's.
	for _, id := range added {
		sent, snapshots, err := c.SentTo(leader, id)
		if err != nil {
			t.Fatal(err)
		}
		f.leaderSent += sent
		f.snapshotsSent += snapshots
	}
	f.hashesAgree = hashesAgree(ctx, t, c, leader)
	removeAdded(ctx, t, c, leader, added)
	return f
}

// join adds one learner, prepares its directory, starts it and promotes it once etcd allows.
// It returns the member ID, the time spent preparing the directory, the time from then to the
// promotion and how far the seed point lagged the leader's applied index.
func join(ctx context.Context, t *testing.T, c *etcdtest.Cluster, leader int, db, mode string) (uint64, time.Duration, time.Duration, uint64) {
	lc := memberConn(t, c, leader)
	m, err := c.NewJoiningMember()
	if err != nil {
		t.Fatal(err)
	}
	added := addLearner(ctx, t, lc, m.PeerURL)
	st, err := lc.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prepStart := time.Now()
	var behind uint64
	switch mode {
	case "empty":
	case "db-only":
		err = SeedDBOnly(db, m.DataDir)
	case "raft", "raft-stale":
		var p restore.SeedPoint
		p, err = SeedRaft(db, m.DataDir, restore.SeedTarget{MemberID: added.ID, ClusterID: st.ClusterID})
		behind = st.RaftAppliedIndex - p.Index
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	if err != nil {
		t.Fatalf("seeding %s (%s): %v", m.Name, mode, err)
	}
	prep := time.Since(prepStart)
	if err := c.StartMember(len(c.Members) - 1); err != nil {
		t.Fatal(err)
	}
	promote(ctx, t, c, lc, added.ID, len(c.Members)-1)
	// The join: from preparing the directory to the promotion (not the wait for etcd to accept
	// the MemberAdd, the same whatever the mode).
	return added.ID, prep, time.Since(prepStart), behind
}

// addLearner retries while etcd finds the cluster unhealthy: it refuses a new member until the
// leader has been connected to the others for a while (a fresh cluster, a member just removed).
func addLearner(ctx context.Context, t *testing.T, lc *etcdclient.MemberConn, peerURL string) etcdclient.Member {
	deadline := time.Now().Add(time.Minute)
	for {
		added, _, err := lc.AddLearner(ctx, []string{peerURL})
		if err == nil {
			return added
		}
		if !etcdclient.IsUnhealthyCluster(err) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// promote retries MemberPromote until etcd's own gate (the learner holds ~90 % of the leader's
// log) lets it through, then waits until the member has applied what the leader had.
func promote(ctx context.Context, t *testing.T, c *etcdtest.Cluster, lc *etcdclient.MemberConn, id uint64, ordinal int) {
	m := c.Members[ordinal]
	deadline := time.Now().Add(joinTimeout)
	for {
		err := lc.Promote(ctx, id)
		if err == nil {
			return
		}
		if !etcdclient.IsLearnerNotReady(err) || !c.Running(ordinal) || time.Now().After(deadline) {
			log, _ := os.ReadFile(m.LogFile)
			t.Fatalf("promoting %s: %v\n%s", m.Name, err, tail(log, 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func removeAdded(ctx context.Context, t *testing.T, c *etcdtest.Cluster, leader int, ids []uint64) {
	lc := memberConn(t, c, leader)
	for i, id := range ids {
		if err := lc.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
		ordinal := len(c.Members) - len(ids) + i
		if err := c.Stop(ordinal); err != nil {
			t.Logf("stopping %s: %v", c.Members[ordinal].Name, err)
		}
		// The next mode's members need the disk.
		_ = os.RemoveAll(c.Members[ordinal].DataDir)
	}
}

// hashesAgree compares every running member's KV hash at the leader's revision.
func hashesAgree(ctx context.Context, t *testing.T, c *etcdtest.Cluster, leader int) bool {
	rev := revision(ctx, t, c, leader)
	var want uint32
	agree := true
	for i := range c.Members {
		if !c.Running(i) {
			continue
		}
		mc := pb.NewMaintenanceClient(dial(t, c, i))
		var resp *pb.HashKVResponse
		var err error
		// A member just promoted may still be applying the last entries.
		for range 100 {
			resp, err = mc.HashKV(ctx, &pb.HashKVRequest{Revision: rev})
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("hash of %s at %d: %v", c.Members[i].Name, rev, err)
		}
		if i == leader || want == 0 {
			want = resp.Hash
		}
		if resp.Hash != want {
			t.Errorf("member %s: hash %x at revision %d, leader %x", c.Members[i].Name, resp.Hash, rev, want)
			agree = false
		}
	}
	return agree
}

func revision(ctx context.Context, t *testing.T, c *etcdtest.Cluster, i int) int64 {
	resp, err := pb.NewKVClient(dial(t, c, i)).Range(ctx, &pb.RangeRequest{Key: []byte("\x00"), CountOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func leaderIndex(ctx context.Context, t *testing.T, c *etcdtest.Cluster) int {
	for i := range c.Members {
		if !c.Running(i) {
			continue
		}
		st, err := memberConn(t, c, i).Status(ctx)
		if err == nil && st.IsLeader() {
			return i
		}
	}
	t.Fatal("no leader")
	return -1
}

// takeSnapshot streams a full snapshot from member i into a file, as a backup does.
func takeSnapshot(ctx context.Context, t *testing.T, c *etcdtest.Cluster, i int) string {
	rc, err := memberConn(t, c, i).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	f, err := os.CreateTemp(*tmpFlag, "seedjoin-*.db")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// fill writes n values of size bytes under prefix from several writers.
func fill(ctx context.Context, t *testing.T, kv pb.KVClient, prefix string, n, size int) {
	value := make([]byte, size)
	for i := range value {
		value[i] = byte(i*7 + 3)
	}
	var next atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	for range writers {
		g.Go(func() error {
			for {
				k := next.Add(1) - 1
				if k >= int64(n) {
					return nil
				}
				if _, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "%s%08d", prefix, k), Value: value}); err != nil {
					return fmt.Errorf("put %d: %w", k, err)
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// cpuTime is the user+system CPU time of process pid (/proc/<pid>/stat, clock ticks of 10 ms).
func cpuTime(t *testing.T, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) start after the last ')'.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

var (
	connsMu sync.Mutex
	conns   = map[string]*etcdclient.MemberConn{}
)

func memberConn(t *testing.T, c *etcdtest.Cluster, i int) *etcdclient.MemberConn {
	connsMu.Lock()
	defer connsMu.Unlock()
	key := c.Members[i].ClientURL
	if mc, ok := conns[key]; ok {
		return mc
	}
	mc, err := c.MemberConn(i, etcdclient.Options{CallTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	conns[key] = mc
	return mc
}

func dial(t *testing.T, c *etcdtest.Cluster, i int) *grpc.ClientConn {
	cc, err := c.Dial(i)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func table(rows []joinFigures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| keyspace | db file | mode | join 3→5 | of which seeding | leader sent to new members | raft snapshots sent | leader CPU | seed behind leader | hashes agree |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d MB | %.0f MB | %s | %.1f s | %.1f s | %.1f MB | %.0f | %.1f s | %d entries | %v |\n",
			r.sizeMB, float64(r.dbBytes)/1e6, r.mode, r.join.Seconds(), r.seedPrep.Seconds(),
			r.leaderSent/1e6, r.snapshotsSent, r.leaderCPU.Seconds(), r.seedIndexBehind, r.hashesAgree)
	}
	return b.String()
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// tempTB puts the cluster's directories under -seedjoin.tmp: at 1 GB they hold several GB.
type tempTB struct{ *testing.T }

func (tb tempTB) TempDir() string {
	dir, err := os.MkdirTemp(*tmpFlag, "seedjoin-cluster-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Clean(dir)
}
