package memberaccess

import (
	"context"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// Querier asks members for their status (the etcdclient Pool).
type Querier interface {
	Query(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []etcdclient.Target) (etcdclient.ClusterStatus, error)
}

// DBSizes asks the Etcd's member pods, through members, for their database size (the backend
// file, which etcd's quota is checked against), for the Etcd reconciler's quota check. Members
// that do not answer are left out; it fails when none answers. The key pair is read fresh: the
// check runs only when the quota is lowered.
func (a *Access) DBSizes(ctx context.Context, members Querier, etcd *druidv1alpha1.Etcd) (map[string]int64, error) {
	cluster, creds, targets, err := a.reach(ctx, etcd)
	if err != nil {
		return nil, err
	}
	cs, err := members.Query(ctx, cluster, creds, targets)
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	for _, m := range cs.Members {
		if m.Reachable {
			sizes[m.Name] = m.DBSize
		}
	}
	return sizes, nil
}
