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

// Downgrade makes the downgrade call through the leader: etcd applies it through raft, and the
// leader is the member whose answer is current. Enabling validates first, so a target etcd
// refuses is reported as such and nothing changes.
func (v Calls) Downgrade(ctx context.Context, etcd *druidv1alpha1.Etcd, action etcdclient.DowngradeAction, target string) error {
	cluster, creds, targets, err := v.Access.reach(ctx, etcd)
	if err != nil {
		return err
	}
	cs, err := v.Members.Query(ctx, cluster, creds, targets)
	if err != nil {
		return err
	}
	leader, ok := cs.Leader()
	if !ok {
		return fmt.Errorf("downgrade %s of %s: no member answered as the leader", action, cluster)
	}
	conn, err := v.Members.Member(cluster, creds, targets, leader.Name)
	if err != nil {
		return err
	}
	if action == etcdclient.DowngradeEnable {
		if _, err := conn.Downgrade(ctx, etcdclient.DowngradeValidate, target); err != nil {
			return err
		}
	}
	_, err = conn.Downgrade(ctx, action, target)
	return err
}

// MoveLeader hands leadership to the member of pod toPod, through the leader; nothing when that
// member leads already.
func (v Calls) MoveLeader(ctx context.Context, etcd *druidv1alpha1.Etcd, toPod string) error {
	cluster, creds, targets, err := v.Access.reach(ctx, etcd)
	if err != nil {
		return err
	}
	cs, err := v.Members.Query(ctx, cluster, creds, targets)
	if err != nil {
		return err
	}
	leader, ok := cs.Leader()
	if !ok {
		return fmt.Errorf("moving leadership in %s: no member answered as the leader", cluster)
	}
	for _, m := range cs.Members {
		if m.Name != toPod {
			continue
		}
		if !m.Reachable {
			return fmt.Errorf("moving leadership in %s: %s did not answer", cluster, toPod)
		}
		if m.ID == leader.ID {
			return nil
		}
		conn, err := v.Members.Member(cluster, creds, targets, leader.Name)
		if err != nil {
			return err
		}
		return conn.MoveLeader(ctx, m.ID)
	}
	return fmt.Errorf("moving leadership in %s: %s is not among the members asked", cluster, toPod)
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
