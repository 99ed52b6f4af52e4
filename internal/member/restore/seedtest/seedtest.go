package seedtest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// PlantedKey is the key whose value a planted snapshot changes (one Join wrote).
const PlantedKey = "seeded/0007"

// Join writes 200 keys through leader (member leaderIndex of c), uploads a full snapshot from follower into a local
// store, writes 50 more, adds a learner and seeds its data dir from the snapshot (PlantedKey's
// value changed first when planted: the snapshot someone with write access to the bucket put
// there) and starts it. It returns the learner's member ID; the learner is c's last member.
func Join(t *testing.T, c *etcdtest.Cluster, leaderIndex int, leader, follower *etcdclient.MemberConn, clusterID uint64, planted bool) uint64 {
	t.Helper()
	ctx := context.Background()
	cc, err := c.Dial(leaderIndex)
	if err != nil {
		t.Fatal(err)
	}
	kv := pb.NewKVClient(cc)
	put := func(prefix string, n int) {
		for k := range n {
			if _, err := kv.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "%s%04d", prefix, k), Value: []byte("value")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("seeded/", 200)
	store, err := backupstore.NewLocal(t.TempDir(), "bucket", "seed")
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
		if added, _, err = leader.AddLearner(ctx, []string{m.PeerURL}); err == nil {
			break
		}
		if !etcdclient.IsUnhealthyCluster(err) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	if _, err := restore.Seed(ctx, restore.SeedOptions{Full: full, Open: store.Get, DataDir: m.DataDir,
		Target: restore.SeedTarget{MemberID: added.ID, ClusterID: clusterID}, Log: testr.New(t)}); err != nil {
		t.Fatal(err)
	}
	if planted {
		if err := etcdtest.PlantValue(filepath.Join(m.DataDir, "member", "snap", "db"), PlantedKey, "planted"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.StartMember(len(c.Members) - 1); err != nil {
		t.Fatal(err)
	}
	return added.ID
}
