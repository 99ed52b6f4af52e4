package membership

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
)

// recordVoters keeps status.voters at the voting membership of the recorded cluster, as its
// leader lists it. Recovery decides on these voters alone (never on pods), so they are taken
// only from a member that answers as leader of the cluster in status.clusterID: a leader means a
// quorum, and a member of another cluster (a restored one not yet recorded, a stray) never
// rewrites what the recorded cluster's voters were.
func (r *Reconciler) recordVoters(ctx context.Context, etcd *druidv1alpha1.Etcd, cs *memberaccess.ClusterStatus) error {
	voters, ok := leaderVoters(cs, etcd.Status.ClusterID)
	if !ok || slices.EqualFunc(voters, etcd.Status.Voters, sameVoter) {
		return nil
	}
	if err := etcdstatus.Patch(ctx, r.cfg.Client, etcd, etcdstatus.WriterMembership, func(s *druidv1alpha1.EtcdStatus) {
		s.Voters = voters
	}); err != nil {
		return fmt.Errorf("recording the voters of cluster %s: %w", etcd.Status.ClusterID, err)
	}
	return nil
}

// leaderVoters are the voters in the member list of a leader of cluster clusterID (hex), by
// name; ok is false when no such leader answered with its list.
func leaderVoters(cs *memberaccess.ClusterStatus, clusterID string) ([]druidv1alpha1.RecordedVoter, bool) {
	if cs == nil || clusterID == "" || len(cs.MemberList) == 0 {
		return nil, false
	}
	leader, ok := cs.Leader()
	if !ok || strconv.FormatUint(leader.ClusterID, 16) != clusterID {
		return nil, false
	}
	var voters []druidv1alpha1.RecordedVoter
	for _, m := range cs.MemberList {
		if m.IsLearner {
			continue
		}
		voters = append(voters, druidv1alpha1.RecordedVoter{Name: m.Name, ID: strconv.FormatUint(m.ID, 16), PeerURLs: slices.Sorted(slices.Values(m.PeerURLs))})
	}
	slices.SortFunc(voters, func(a, b druidv1alpha1.RecordedVoter) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return voters, true
}

func sameVoter(a, b druidv1alpha1.RecordedVoter) bool {
	return a.Name == b.Name && a.ID == b.ID && slices.Equal(a.PeerURLs, b.PeerURLs)
}
