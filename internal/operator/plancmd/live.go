package plancmd

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/memberaccess"
)

// ReadLive reads the StatefulSet named name (the Etcd's name), the Etcd owning it and its
// member pods with the controller's own readers. The member Leases are read only when the
// decision needs them: pass LiveLeases(c) to Plan.
func ReadLive(ctx context.Context, c client.Reader, namespace, name string) (State, error) {
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, sts); err != nil {
		return State{}, fmt.Errorf("reading StatefulSet %s/%s: %w", namespace, name, err)
	}
	etcd, err := memberaccess.ReadOwningEtcd(ctx, c, sts)
	if err != nil {
		return State{}, fmt.Errorf("reading the Etcd owning StatefulSet %s/%s: %w", namespace, name, err)
	}
	pods, err := memberaccess.ReadMemberPods(ctx, c, sts)
	if err != nil {
		return State{}, err
	}
	return State{Etcd: etcd, StatefulSet: sts, Pods: pods}, nil
}

// LiveLeases reads member Leases from the cluster, as the controller does.
func LiveLeases(c client.Reader) LeaseSource {
	return func(ctx context.Context, etcd *druidv1alpha1.Etcd) ([]coordinationv1.Lease, error) {
		return memberaccess.ReadMemberLeases(ctx, c, etcd)
	}
}
