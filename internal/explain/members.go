package explain

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/roles"
	"github.com/etcd-conductor/etcd-conductor/internal/rollout"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// MemberQuerier is the part of etcdclient.Pool plan uses.
type MemberQuerier interface {
	Query(ctx context.Context, cluster string, creds conductortls.ClientMaterial, targets []etcdclient.Target) (etcdclient.ClusterStatus, error)
}

var _ MemberQuerier = (*etcdclient.Pool)(nil)

// AskMembers asks every member pod of st for its status, the way the controller does, and
// returns the reports Resolve expects. addresses overrides "podIP:clientPort" per pod name, for
// members reached through `kubectl port-forward`. The certificate is always verified against
// the member's DNS name. When no member answers, the reports say so (all unreachable) and the
// error is returned too, so the caller may show it while roles fall back to the Leases.
func AskMembers(ctx context.Context, q MemberQuerier, creds conductortls.ClientMaterial, st State, addresses map[string]string) ([]roles.MemberReport, error) {
	sts := st.StatefulSet
	port := clientPort(sts.Spec.Template.Spec.Containers)
	var targets []etcdclient.Target
	for _, pod := range podsOf(sts, st.Pods) {
		address, ok := addresses[pod.Name]
		if !ok {
			if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
				continue
			}
			address = net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port)))
		}
		targets = append(targets, etcdclient.Target{
			Name: pod.Name, Address: address,
			ServerName: resources.MemberDNSName(sts.Name, sts.Namespace, pod.Name),
		})
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("no member pod of %s/%s has an address", sts.Namespace, sts.Name)
	}
	cs, err := q.Query(ctx, sts.Namespace+"/"+sts.Name, creds, targets)
	return roles.ReportsFromClusterStatus(cs), err
}

// clientPort is the etcd container's port named "client", else etcd's default.
func clientPort(containers []corev1.Container) int32 {
	for _, c := range containers {
		if c.Name != rollout.EtcdContainerName {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == "client" {
				return p.ContainerPort
			}
		}
	}
	return resources.DefaultClientPort
}
