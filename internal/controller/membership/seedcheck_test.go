package membership

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	bolt "go.etcd.io/bbolt"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/backupstore"
	"github.com/etcd-conductor/etcd-conductor/internal/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/restore"
	"github.com/etcd-conductor/etcd-conductor/internal/snapshot"
)

// TestSeededLearnerComparedWithTheLeader: on real mTLS members, a learner seeded from the backup
// store's latest full snapshot is compared with the leader at one revision before the planner
// promotes it. Seeded from the cluster's own snapshot it is promoted; seeded from a snapshot
// planted in the bucket (one value changed: the consistent index and the origin are the
// cluster's, so raft and internal/seeding accept it, and the leader's log never touches that key
// again) it is removed, not promoted. etcd refuses a learner HashKV, which is why the comparison
// reads each member's keyspace serializably.
func TestSeededLearnerComparedWithTheLeader(t *testing.T) {
	if _, err := etcdtest.EtcdBinary(etcdtest.DefaultVersion); err != nil {
		t.Skipf("etcd binary not built: %v", err)
	}
	for _, planted := range []bool{false, true} {
		t.Run(fmt.Sprintf("planted=%v", planted), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c := etcdtest.Start(t, etcdtest.Config{Members: 3, EtcdName: "seed"})
			pool := etcdclient.NewPool(etcdclient.Options{CallTimeout: 30 * time.Second})
			t.Cleanup(pool.Close)
			cs, err := pool.Query(ctx, "seed", c.Client, c.Targets())
			if err != nil {
				t.Fatal(err)
			}
			leader, ok := cs.Leader()
			if !ok {
				t.Fatal("no leader")
			}
			lc, err := pool.Member("seed", c.Client, c.Targets(), leader.Name)
			if err != nil {
				t.Fatal(err)
			}
			leaderIndex := -1
			for i, m := range c.Members {
				if m.Name == leader.Name {
					leaderIndex = i
				}
			}
			put := func(prefix string, n int) {
				cc, err := c.Dial(leaderIndex)
				if err != nil {
					t.Fatal(err)
				}
				for k := range n {
					if _, err := pb.NewKVClient(cc).Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "%s%04d", prefix, k), Value: []byte("value")}); err != nil {
						t.Fatal(err)
					}
				}
			}
			put("data/", 200)
			store, err := backupstore.NewLocal(t.TempDir(), "bucket", "seed")
			if err != nil {
				t.Fatal(err)
			}
			follower, err := c.MemberConn((leaderIndex+1)%3, etcdclient.Options{CallTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			full, _, err := backup.UploadFull(ctx, follower, store, t.TempDir(), time.Now(), snapshot.CompressionGzip)
			if err != nil {
				t.Fatal(err)
			}
			put("after/", 50)

			m, err := c.NewJoiningMember()
			if err != nil {
				t.Fatal(err)
			}
			var added etcdclient.Member
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
				if added, _, err = lc.AddLearner(ctx, []string{m.PeerURL}); err == nil {
					break
				}
				if !etcdclient.IsUnhealthyCluster(err) || time.Now().After(deadline) {
					t.Fatal(err)
				}
			}
			if _, err := restore.Seed(ctx, restore.SeedOptions{Full: full, Open: store.Get, DataDir: m.DataDir,
				Target: restore.SeedTarget{MemberID: added.ID, ClusterID: leader.ClusterID}, Log: testr.New(t)}); err != nil {
				t.Fatal(err)
			}
			if planted {
				plantValue(t, filepath.Join(m.DataDir, "member", "snap", "db"), "data/0007", "planted")
			}
			if err := c.StartMember(len(c.Members) - 1); err != nil {
				t.Fatal(err)
			}

			// The learner catches up with the leader's revision.
			self := membership.Member{ID: added.ID, Name: m.Name, Ordinal: 3, Learner: true, Started: true, Healthy: true, Seeded: true}
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
				cs, err = pool.Query(ctx, "seed", c.Client, c.Targets())
				if err == nil && len(cs.Members) == 4 && cs.Members[3].Reachable && cs.Members[3].Revision >= leader.Revision+50 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the learner did not catch up: %+v (%v)", cs.Members, err)
				}
			}
			cc, err := c.Dial(3)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pb.NewMaintenanceClient(cc).HashKV(ctx, &pb.HashKVRequest{}); err == nil || !strings.Contains(err.Error(), "not supported for learner") {
				t.Fatalf("HashKV on a learner: %v; want etcd's refusal", err)
			}

			self.Keyspace = CompareKeyspace(ctx, pool, "seed", c.Client, c.Targets(), &cs, &self)
			t.Logf("keyspace comparison: %+v", *self.Keyspace)
			o := membership.Observed{Desired: 4, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, HeardKnown: true}
			for i, mm := range c.Members[:3] {
				o.Members = append(o.Members, membership.Member{ID: cs.Members[i].ID, Name: mm.Name, Ordinal: i, Started: true, Healthy: true, Heard: true, Leader: mm.Name == leader.Name})
			}
			o.Members = append(o.Members, self)
			d := membership.Plan(o)
			want := membership.RulePromote
			if planted {
				want = membership.RuleSeedMismatch
			}
			if d.Rule != want {
				t.Fatalf("Plan = %s (%s); want %s", d.Rule, d.Reason, want)
			}
			t.Logf("%s: %s", d.Rule, d.Reason)
		})
	}
}

// plantValue changes the value of key's latest revision in the etcd database at path, as a
// snapshot written into the bucket by someone else would hold it.
func plantValue(t *testing.T, path, key, value string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("no key bucket in %s", path)
		}
		var revision []byte
		var kv *mvccpb.KeyValue
		if err := b.ForEach(func(k, v []byte) error {
			e := &mvccpb.KeyValue{}
			if err := proto.Unmarshal(v, e); err != nil {
				return err
			}
			if string(e.Key) == key {
				revision, kv = append([]byte(nil), k...), e
			}
			return nil
		}); err != nil {
			return err
		}
		if revision == nil {
			return fmt.Errorf("key %s not in %s", key, path)
		}
		kv.Value = []byte(value)
		raw, err := proto.Marshal(kv)
		if err != nil {
			return err
		}
		return b.Put(revision, raw)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
