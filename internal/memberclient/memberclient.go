// Package memberclient gives controllers what they need to talk to an Etcd's members over mTLS:
// the targets (pod IP, verified DNS name) and the client key pair. The OnDelete and
// defragmentation controllers share it, so both reach the members the same way.
package memberclient

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/resources"
	conductortls "github.com/etcd-conductor/etcd-conductor/tls"
)

// ClusterKey names an Etcd's connections in the member client pool.
func ClusterKey(namespace, etcdName string) string { return namespace + "/" + etcdName }

// Targets lists the member pods that can be dialled: those with an IP and not terminating.
func Targets(etcd *druidv1alpha1.Etcd, pods []corev1.Pod) []etcdclient.Target {
	var targets []etcdclient.Target
	for _, pod := range pods {
		if pod.Status.PodIP == "" || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		targets = append(targets, etcdclient.Target{
			Name:       pod.Name,
			Address:    net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(resources.ClientPort(etcd)))),
			ServerName: resources.MemberDNSName(etcd.Name, etcd.Namespace, pod.Name),
		})
	}
	return targets
}

// ClientTLS returns the Etcd's own client key pair (clientUrlTls.clientTLSSecretRef with its CA),
// else the operator-wide one from fallback (nil when the operator has none).
func ClientTLS(ctx context.Context, reader client.Reader, etcd *druidv1alpha1.Etcd, fallback func() (conductortls.ClientMaterial, error)) (conductortls.ClientMaterial, error) {
	t := etcd.Spec.Etcd.ClientUrlTLS
	if t == nil || t.ClientTLSSecretRef.Name == "" {
		if fallback == nil {
			return conductortls.ClientMaterial{}, fmt.Errorf("Etcd names no clientUrlTls.clientTLSSecretRef and the operator has no memberClientTLS configured")
		}
		return fallback()
	}
	caSecret, err := secret(ctx, reader, etcd.Namespace, t.TLSCASecretRef.Name)
	if err != nil {
		return conductortls.ClientMaterial{}, err
	}
	clientSecret, err := secret(ctx, reader, etcd.Namespace, t.ClientTLSSecretRef.Name)
	if err != nil {
		return conductortls.ClientMaterial{}, err
	}
	return conductortls.FromSecrets(caSecret, resources.CADataKey(t.TLSCASecretRef), clientSecret)
}

func secret(ctx context.Context, reader client.Reader, namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
	}
	return s, nil
}

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
	targets := Targets(etcd, pods.Items)
	if len(targets) == 0 {
		return nil, fmt.Errorf("no member pod of %s/%s has an address", etcd.Namespace, etcd.Name)
	}
	creds, err := ClientTLS(ctx, reader, etcd, fallback)
	if err != nil {
		return nil, err
	}
	cs, err := members.Query(ctx, ClusterKey(etcd.Namespace, etcd.Name), creds, targets)
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
