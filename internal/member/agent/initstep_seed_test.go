package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/member/agent"
	"github.com/etcd-conductor/etcd-conductor/internal/member/backup"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// TestInitSeedsAJoiningLearner runs the init step of a learner the operator added to a running
// 3-member etcd cluster, with a Local store holding a full snapshot of that cluster:
//   - the snapshot's origin record names the running cluster: the step seeds the data dir, the
//     member joins from it and the leader sends it no raft snapshot;
//   - the record names another cluster (a backup from before a restore) or there is none
//     (etcd-druid's backups): the step leaves the data dir empty and the member joins as before.
func TestInitSeedsAJoiningLearner(t *testing.T) {
	if _, err := etcdtest.EtcdBinary(etcdtest.DefaultVersion); err != nil {
		t.Skipf("etcd binary not built: %v", err)
	}
	c := etcdtest.Start(t, etcdtest.Config{Members: 3, EtcdName: "seed", Plaintext: true, SameClientPort: true})
	ctx := context.Background()
	leader, lc, clusterID := leaderOf(t, c)
	putValues(t, c, leader, "data/", 128, 16<<10)
	owner := snapshot.Owner{Etcd: namespace + "/seed", EtcdUID: "uid-seed"}

	for _, tc := range []struct {
		name     string
		origin   string // "": no record
		wantSeed bool
	}{
		{name: "this cluster", origin: fmt.Sprintf("%x", clusterID), wantSeed: true},
		{name: "another cluster", origin: "deadbeef"},
		{name: "no origin record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := backupstore.NewLocal(t.TempDir(), "backups", "seed")
			if err != nil {
				t.Fatal(err)
			}
			follower := (leader + 1) % 3
			fc, err := c.MemberConn(follower, etcdclient.Options{CallTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			full, _, err := backup.UploadFull(ctx, fc, store, t.TempDir(), time.Now(), snapshot.CompressionGzip)
			if err != nil {
				t.Fatal(err)
			}
			if tc.origin != "" {
				meta := snapshot.EncodeFullMeta(snapshot.FullMeta{Origin: snapshot.Origin{Etcd: owner.Etcd, EtcdUID: owner.EtcdUID, ClusterID: tc.origin}})
				if _, err := store.Put(ctx, snapshot.FullMetaKey(full), bytes.NewReader(meta), int64(len(meta)), backupstore.SHA256Hex(meta)); err != nil {
					t.Fatal(err)
				}
			}
			putValues(t, c, leader, "after/"+tc.name+"/", 100, 100)

			m, err := c.NewJoiningMember()
			if err != nil {
				t.Fatal(err)
			}
			id := addLearner(t, lc, m.PeerURL)
			runInit(t, c, m, store, owner)
			_, err = os.Stat(filepath.Join(m.DataDir, "member", "wal"))
			if seeded := err == nil; seeded != tc.wantSeed {
				t.Fatalf("data dir seeded: %v, want %v", seeded, tc.wantSeed)
			}
			if !tc.wantSeed {
				// Joining empty is today's path, tested elsewhere; the learner goes again.
				if err := lc.Remove(ctx, id); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err := c.StartMember(len(c.Members) - 1); err != nil {
				t.Fatal(err)
			}
			promoteWhenReady(t, lc, id)
			if _, snaps, err := c.SentTo(leader, id); err != nil || snaps != 0 {
				t.Fatalf("the leader sent %v raft snapshots (%v) to the seeded learner, want 0", snaps, err)
			}
		})
	}
}

// runInit runs the init step for joining member m until it writes the etcd configuration.
func runInit(t *testing.T, c *etcdtest.Cluster, m *etcdtest.Member, store backupstore.Store, owner snapshot.Owner) {
	t.Helper()
	var initial []string
	for i, member := range c.Members {
		if c.Running(i) || member == m {
			initial = append(initial, member.Name+"="+member.PeerURL)
		}
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(c.Members[0].ClientURL, "http://"), ":")
	clientPort, _ := strconv.Atoi(port)
	root := t.TempDir()
	init, err := agent.NewInitializer(agent.InitConfig{
		ConfigFile:   filepath.Join(root, "etcd.conf.yaml"),
		ClientPort:   clientPort,
		ClientFiles:  agent.ClientFiles{Plaintext: true},
		PollInterval: 50 * time.Millisecond,
		EtcdFlags: []string{"--name=" + m.Name, "--data-dir=" + m.DataDir, "--initial-advertise-peer-urls=" + m.PeerURL,
			"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=existing"},
		BackupStore: func(context.Context) (backupstore.Store, error) { return store, nil },
		BackupOwner: owner,
	}, nil, nil, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := init.Run(ctx); err != nil {
		t.Fatalf("init step: %v", err)
	}
	conf, err := os.ReadFile(filepath.Join(root, "etcd.conf.yaml"))
	if err != nil || !strings.Contains(string(conf), "initial-cluster-state: existing") {
		t.Fatalf("etcd configuration (%v):\n%s", err, conf)
	}
}

func leaderOf(t *testing.T, c *etcdtest.Cluster) (int, *etcdclient.MemberConn, uint64) {
	t.Helper()
	for i := range c.Members {
		mc, err := c.MemberConn(i, etcdclient.Options{CallTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := mc.Status(context.Background()); err == nil && st.IsLeader() {
			return i, mc, st.ClusterID
		}
	}
	t.Fatal("no leader")
	return 0, nil, 0
}

func putValues(t *testing.T, c *etcdtest.Cluster, i int, prefix string, n, size int) {
	t.Helper()
	cc, err := c.Dial(i)
	if err != nil {
		t.Fatal(err)
	}
	kv := pb.NewKVClient(cc)
	value := bytes.Repeat([]byte("v"), size)
	for k := range n {
		if _, err := kv.Put(context.Background(), &pb.PutRequest{Key: fmt.Appendf(nil, "%s%06d", prefix, k), Value: value}); err != nil {
			t.Fatal(err)
		}
	}
}

// addLearner adds a learner, asking again while etcd finds the cluster too fresh for it.
func addLearner(t *testing.T, lc *etcdclient.MemberConn, peerURL string) uint64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		added, _, err := lc.AddLearner(context.Background(), []string{peerURL})
		if err == nil {
			return added.ID
		}
		if !etcdclient.IsUnhealthyCluster(err) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func promoteWhenReady(t *testing.T, lc *etcdclient.MemberConn, id uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := lc.Promote(context.Background(), id)
		if err == nil {
			return
		}
		if !etcdclient.IsLearnerNotReady(err) || time.Now().After(deadline) {
			t.Fatal(errors.Join(errors.New("promoting the seeded learner"), err))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
