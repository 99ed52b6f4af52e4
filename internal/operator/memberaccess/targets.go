package memberaccess

import (
	"errors"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// ErrNoMemberAddress is what asking members returns when no member pod can be dialled.
var ErrNoMemberAddress = errors.New("no member pod has an address")

// Targets are the member pods that have an address and are not terminating, dialled at their pod
// IP and verified against their member DNS name.
func Targets(etcd *druidv1alpha1.Etcd, pods []corev1.Pod) []etcdclient.Target {
	var out []etcdclient.Target
	for _, pod := range pods {
		if pod.Status.PodIP == "" || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		out = append(out, etcdclient.Target{
			Name:       pod.Name,
			Address:    net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(resources.ClientPort(etcd)))),
			ServerName: resources.MemberDNSName(etcd.Name, etcd.Namespace, pod.Name),
		})
	}
	return out
}
