package membership

import (
	"context"
	"fmt"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/etcdclient/etcdtest"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/membership"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore/seedtest"
)

// TestSeededLearnerComparedWithTheLeader: on real mTLS members, a learner seeded from the backup
// store's latest full snapshot is compared with the leader at one revision before the planner
// promotes it. Seeded from the cluster's own snapshot it is promoted; seeded from a snapshot
// planted in the bucket (one value changed: the consistent index and the origin are the
// cluster's, so raft and internal/decide/seeding accept it, and the leader's log never touches that key
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
			follower, err := c.MemberConn((leaderIndex+1)%3, etcdclient.Options{CallTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			id := seedtest.Join(t, c, leaderIndex, lc, follower, leader.ClusterID, planted)
			m := c.Members[3]

			// The learner catches up with the leader's revision.
			self := membership.Member{ID: id, Name: m.Name, Ordinal: 3, Learner: true, Started: true, Healthy: true, Seeded: true}
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

			seed := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "seed"}}
			self.Keyspace = CompareKeyspace(ctx, memberaccess.NewCluster(pool, seed, memberaccess.ForMembership, c.Client, c.Targets()), &cs, &self)
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
