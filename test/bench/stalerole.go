package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/rollout"
	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// forceLeaderToFirstFollower sets up the stale-role race. Among participating followers the
// controller deletes the lowest ordinal first, so member 0 is the one a stale view gets wrong:
// make sure member 0 is a follower and its Lease says so, wait for its agent to renew that Lease
// (the next renewal is a whole renewal interval away), then move leadership to member 0. Until
// member 0's agent renews again its Lease still says Member, while it leads.
func forceLeaderToFirstFollower(ctx context.Context, e *runEnv) error {
	pool := etcdclient.NewPool(etcdclient.Options{})
	defer pool.Close()
	clusterKey := e.cluster.Namespace + "/" + e.cluster.Name
	creds := e.cluster.PKI.ClientMaterial()
	target := e.cluster.PodName(0)

	status := func() (etcdclient.ClusterStatus, etcdclient.MemberStatus, error) {
		cs, err := pool.Query(ctx, clusterKey, creds, targets(e.cluster))
		if err != nil {
			return cs, etcdclient.MemberStatus{}, fmt.Errorf("asking the members: %w", err)
		}
		leader, ok := cs.Leader()
		if !ok {
			return cs, leader, fmt.Errorf("no member answered as leader")
		}
		return cs, leader, nil
	}
	idOf := func(cs etcdclient.ClusterStatus, name string) (uint64, error) {
		for _, m := range cs.Members {
			if m.Name == name && m.Reachable {
				return m.ID, nil
			}
		}
		return 0, fmt.Errorf("member %s did not answer", name)
	}

	cs, leader, err := status()
	if err != nil {
		return err
	}
	if leader.Name == target {
		other, err := idOf(cs, e.cluster.PodName(1))
		if err != nil {
			return err
		}
		if err := pool.MoveLeader(ctx, clusterKey, creds, targets(e.cluster), leader.Name, other); err != nil {
			return fmt.Errorf("moving leadership away from %s: %w", target, err)
		}
	}
	if err := e.waitLease(ctx, target, 30*time.Second, func(role rollout.Role, _ time.Time) bool { return role == rollout.RoleFollower }); err != nil {
		return err
	}
	_, renewed, err := e.lease(ctx, target)
	if err != nil {
		return err
	}
	// Sit right behind a renewal: the stale window is then as long as the renewal interval.
	if err := e.waitLease(ctx, target, 30*time.Second, func(role rollout.Role, at time.Time) bool {
		return role == rollout.RoleFollower && at.After(renewed)
	}); err != nil {
		return err
	}

	cs, leader, err = status()
	if err != nil {
		return err
	}
	id, err := idOf(cs, target)
	if err != nil {
		return err
	}
	if err := pool.MoveLeader(ctx, clusterKey, creds, targets(e.cluster), leader.Name, id); err != nil {
		return fmt.Errorf("moving leadership to %s: %w", target, err)
	}
	// Bump only once the instruments saw it, so "leader at each deletion" is measured, not assumed.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		epochs := e.recorder.LeaderMonitor().Snapshot().Epochs
		if len(epochs) > 0 && epochs[len(epochs)-1].Leader == target {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the leader monitor did not see %s take over", target)
}

func targets(c *stack.EtcdCluster) []etcdclient.Target {
	var out []etcdclient.Target
	for _, ep := range c.Endpoints()() {
		out = append(out, etcdclient.Target{Name: ep.Name, Address: ep.Address, ServerName: ep.ServerName})
	}
	return out
}

// lease reads a member Lease: the role its holder claims and when it was renewed.
func (e *runEnv) lease(ctx context.Context, name string) (rollout.Role, time.Time, error) {
	l, err := e.stack.Kube.CoordinationV1().Leases(e.cluster.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("reading lease %s: %w", name, err)
	}
	if l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil {
		return "", time.Time{}, nil
	}
	_, _, role, ok := roles.ParseHolderIdentity(*l.Spec.HolderIdentity)
	if !ok {
		return "", time.Time{}, nil
	}
	return role, l.Spec.RenewTime.Time, nil
}

func (e *runEnv) waitLease(ctx context.Context, name string, timeout time.Duration, cond func(rollout.Role, time.Time) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		role, at, err := e.lease(ctx, name)
		if err == nil && cond(role, at) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lease %s: condition not met within %s (role %q renewed %s, error %v)", name, timeout, role, at.Format(time.RFC3339Nano), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderAt is the member that led at t by the leader monitor: the last epoch first seen at
// least a margin before t. The margin keeps out a handover the deletion itself set off (a
// deleted leader hands over on SIGTERM, and a poll round is stamped when it starts).
func leaderAt(epochs []workload.LeaderEpoch, t time.Time) string {
	const margin = 50 * time.Millisecond
	sorted := append([]workload.LeaderEpoch(nil), epochs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].At.Before(sorted[j].At) })
	leader := ""
	for _, ep := range sorted {
		if ep.At.After(t.Add(-margin)) {
			break
		}
		leader = ep.Leader
		if leader == "" {
			leader = ep.LeaderID
		}
	}
	return leader
}

// participatingAt says whether member was serving at t by the quorum monitor's samples.
func participatingAt(samples []workload.ParticipationSample, member string, t time.Time) bool {
	p := false
	for _, s := range samples {
		if s.Member != member {
			continue
		}
		if s.At.After(t) {
			break
		}
		p = s.Participating
	}
	return p
}

// leaderDeletedWhileFollowersRemained counts deletions of the then-leader while another
// outdated member (not yet deleted in this rollout) was participating: a follower the
// controller could have taken instead.
func leaderDeletedWhileFollowersRemained(deletions []report.DeletionRecord, at []time.Time, members []string, outdated func(i int) bool, participation []workload.ParticipationSample) int {
	count := 0
	deleted := map[string]bool{}
	for i, d := range deletions {
		if d.Participating && d.Leader == d.Pod {
			for _, m := range members {
				if m != d.Pod && !deleted[m] && participatingAt(participation, m, at[i]) {
					count++
					break
				}
			}
		}
		if outdated(i) {
			deleted[d.Pod] = true
		}
	}
	return count
}
