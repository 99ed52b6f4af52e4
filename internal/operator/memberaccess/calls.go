package memberaccess

import (
	"context"
	"fmt"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// MemberCaller asks members questions and hands out a member's connection for a call to it
// (the etcdclient Pool).
type MemberCaller interface {
	Querier
	Member(cluster string, creds conductortls.ClientMaterial, targets []etcdclient.Target, name string) (*etcdclient.MemberConn, error)
}

// Calls are the Etcd reconciler's questions and orders to an Etcd's members: their status (for the
// version and volume planners), etcd's downgrade calls and a leadership move.
type Calls struct {
	Access  *Access
	Members MemberCaller
}

// Statuses asks every member pod of etcd with an address for its status; one entry per pod, in
// pod order, unanswered ones with their error.
func (v Calls) Statuses(ctx context.Context, etcd *druidv1alpha1.Etcd) (etcdclient.ClusterStatus, error) {
	_, creds, targets, err := v.Access.reach(ctx, etcd)
	if err != nil {
		return etcdclient.ClusterStatus{}, err
	}
	return v.Members.Query(ctx, ClusterKey(etcd.Namespace, etcd.Name), creds, targets)
}

// Downgrade makes the downgrade call through the leader. Enabling validates first, so a target
// etcd refuses is reported as such and nothing changes.
func (v Calls) Downgrade(ctx context.Context, etcd *druidv1alpha1.Etcd, action etcdclient.DowngradeAction, target string) error {
	_, leader, err := v.throughLeader(ctx, etcd)
	if err != nil {
		return fmt.Errorf("downgrade %s: %w", action, err)
	}
	if action == etcdclient.DowngradeEnable {
		if _, err := leader.Downgrade(ctx, etcdclient.DowngradeValidate, target); err != nil {
			return err
		}
	}
	_, err = leader.Downgrade(ctx, action, target)
	return err
}

// MoveLeader hands leadership to the member of pod toPod, through the leader; nothing when that
// member leads already.
func (v Calls) MoveLeader(ctx context.Context, etcd *druidv1alpha1.Etcd, toPod string) error {
	cs, leader, err := v.throughLeader(ctx, etcd)
	if err != nil {
		return fmt.Errorf("moving leadership to %s: %w", toPod, err)
	}
	for _, m := range cs.Members {
		switch {
		case m.Name != toPod:
		case !m.Reachable:
			return fmt.Errorf("moving leadership: %s did not answer", toPod)
		case m.Name == leader.Target().Name:
			return nil
		default:
			return leader.MoveLeader(ctx, m.ID)
		}
	}
	return fmt.Errorf("moving leadership: %s is not among the members asked", toPod)
}

// throughLeader asks the members and returns their answers with the leader's connection: the calls
// etcd applies through raft go to the leader, whose answer is current.
func (v Calls) throughLeader(ctx context.Context, etcd *druidv1alpha1.Etcd) (etcdclient.ClusterStatus, *etcdclient.MemberConn, error) {
	cluster, creds, targets, err := v.Access.reach(ctx, etcd)
	if err != nil {
		return etcdclient.ClusterStatus{}, nil, err
	}
	cs, err := v.Members.Query(ctx, cluster, creds, targets)
	if err != nil {
		return cs, nil, err
	}
	leader, ok := cs.Leader()
	if !ok {
		return cs, nil, fmt.Errorf("%s: no member answered as the leader", cluster)
	}
	conn, err := v.Members.Member(cluster, creds, targets, leader.Name)
	return cs, conn, err
}

// reach is what a call to etcd's members needs: the pool's key, client TLS read fresh (the calls
// that use it are rare, and their answers decide what is rendered) and the targets.
func (a *Access) reach(ctx context.Context, etcd *druidv1alpha1.Etcd) (string, conductortls.ClientMaterial, []etcdclient.Target, error) {
	pods, err := ReadLabelledPods(ctx, a.reader, etcd)
	if err != nil {
		return "", conductortls.ClientMaterial{}, nil, err
	}
	targets := Targets(etcd, pods)
	if len(targets) == 0 {
		return "", conductortls.ClientMaterial{}, nil, fmt.Errorf("no member pod of %s/%s has an address", etcd.Namespace, etcd.Name)
	}
	creds, err := a.FreshClientTLS(ctx, etcd)
	if err != nil {
		return "", conductortls.ClientMaterial{}, nil, err
	}
	return ClusterKey(etcd.Namespace, etcd.Name), creds, targets, nil
}
