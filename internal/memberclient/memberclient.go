// Package memberclient asks an Etcd's members what the defragmentation controller and the Etcd
// reconciler need (database sizes), reaching them as every controller does (memberaccess).
package memberclient

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decision"
	"github.com/etcd-conductor/etcd-conductor/internal/memberaccess"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// Querier asks members for their status (the etcdclient Pool).
type Querier interface {
	Query(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []etcdclient.Target) (etcdclient.ClusterStatus, error)
}

// DBSizes asks the Etcd's member pods for their database size (the backend file, which etcd's
// quota is checked against). Members that do not answer are left out; it fails when none answers.
func DBSizes(ctx context.Context, reader client.Reader, members Querier, etcd *druidv1alpha1.Etcd, fallback func() (conductortls.ClientMaterial, error)) (map[string]int64, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(etcd.Namespace), client.MatchingLabels(resources.SelectorLabels(etcd))); err != nil {
		return nil, fmt.Errorf("listing member pods: %w", err)
	}
	targets := memberaccess.Targets(etcd, pods.Items)
	if len(targets) == 0 {
		return nil, fmt.Errorf("no member pod of %s/%s has an address", etcd.Namespace, etcd.Name)
	}
	creds, err := memberaccess.ClientTLS(ctx, reader, etcd, fallback)
	if err != nil {
		return nil, err
	}
	cs, err := members.Query(ctx, decision.ClusterKey(etcd.Namespace, etcd.Name), creds, targets)
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
