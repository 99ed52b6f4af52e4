package membership

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// readsOnly is a member pool in which only linearizable reads are asked: members in serving serve
// one; it records who was asked.
type readsOnly struct {
	memberaccess.Pool // what hear does not ask: a call panics
	serving           []string
	asked             [][]string
}

func (f *readsOnly) LinearizableReads(_ context.Context, _ string, _ conductortls.ClientMaterial, _ []etcdclient.Target, names []string) ([]string, error) {
	f.asked = append(f.asked, slices.Clone(names))
	var served []string
	var err error
	for _, n := range names {
		if slices.Contains(f.serving, n) {
			served = append(served, n)
		} else {
			err = errors.Join(err, errors.New(n+": context deadline exceeded"))
		}
	}
	return served, err
}

func (f *readsOnly) Forget(string) {}

// TestHear: the leader counts as heard for having answered as leader; every other voter with a
// pod address is asked for a linearizable read and heard only if it serves one; learners and
// voters without an address are not asked; without a leader nobody is heard or asked.
func TestHear(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
	tgts := []etcdclient.Target{{Name: "main-0"}, {Name: "main-1"}, {Name: "main-2"}, {Name: "main-3"}}
	list := []etcdclient.Member{
		{ID: 0xa, Name: "main-0"},
		{ID: 0xb, Name: "main-1"},
		{ID: 0xc, Name: "main-2"},
		{ID: 0xd, Name: "main-3", IsLearner: true},
		{ID: 0xe, Name: "main-4"}, // its pod has no address
		{ID: 0xf},                 // added, not started
	}
	status := func(leader uint64) []etcdclient.MemberStatus {
		var out []etcdclient.MemberStatus
		for _, m := range list[:4] {
			out = append(out, etcdclient.MemberStatus{Name: m.Name, Reachable: true, ID: m.ID, LeaderID: leader})
		}
		return out
	}

	t.Run("the leader and the voters that serve a read", func(t *testing.T) {
		// main-2 answers its status request (it is in cs as reachable) but is cut off from the
		// leader: it serves no read.
		pool := &readsOnly{serving: []string{"main-1"}}
		r := NewReconciler(Config{Members: pool})
		got := r.hear(context.Background(), etcd, tgts, conductortls.ClientMaterial{}, &etcdclient.ClusterStatus{Members: status(0xa), MemberList: list})
		if want := map[uint64]bool{0xa: true, 0xb: true}; !maps.Equal(got, want) {
			t.Errorf("heard %v, want %v", got, want)
		}
		if want := [][]string{{"main-1", "main-2"}}; !slices.EqualFunc(pool.asked, want, slices.Equal) {
			t.Errorf("asked %v, want %v (not the leader, not the learner, not a voter without an address)", pool.asked, want)
		}
	})
	t.Run("no leader: nobody heard, nobody asked", func(t *testing.T) {
		pool := &readsOnly{serving: []string{"main-0", "main-1", "main-2"}}
		r := NewReconciler(Config{Members: pool})
		got := r.hear(context.Background(), etcd, tgts, conductortls.ClientMaterial{}, &etcdclient.ClusterStatus{Members: status(0), MemberList: list})
		if got == nil || len(got) != 0 {
			t.Errorf("heard %v, want an empty set (asked, none heard)", got)
		}
		if len(pool.asked) != 0 {
			t.Errorf("asked %v without a leader", pool.asked)
		}
	})
}

// TestHearWithMemberNamePrefix: members named <prefix>-<pod> are asked through their pods'
// targets, by pod name; a voter whose name maps to no pod is asked nothing and not heard.
func TestHearWithMemberNamePrefix(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: druidv1alpha1.EtcdSpec{MemberNamePrefix: ptr.To("p")}}
	tgts := []etcdclient.Target{{Name: "main-0"}, {Name: "main-1"}, {Name: "main-2"}}
	list := []etcdclient.Member{
		{ID: 0xa, Name: "p-main-0"},
		{ID: 0xb, Name: "p-main-1"},
		{ID: 0xc, Name: "other-2", PeerURLs: []string{"https://10.0.0.9:2380"}},
	}
	var status []etcdclient.MemberStatus
	for i, m := range list {
		status = append(status, etcdclient.MemberStatus{Name: tgts[i].Name, Reachable: true, ID: m.ID, LeaderID: 0xa})
	}
	pool := &readsOnly{serving: []string{"main-1", "main-2", "other-2"}}
	r := NewReconciler(Config{Members: pool})
	got := r.hear(context.Background(), etcd, tgts, conductortls.ClientMaterial{}, &etcdclient.ClusterStatus{Members: status, MemberList: list})
	if want := map[uint64]bool{0xa: true, 0xb: true}; !maps.Equal(got, want) {
		t.Errorf("heard %v, want %v", got, want)
	}
	if want := [][]string{{"main-1"}}; !slices.EqualFunc(pool.asked, want, slices.Equal) {
		t.Errorf("asked %v, want %v", pool.asked, want)
	}
}
