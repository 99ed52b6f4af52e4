// Package memberaccess holds what every controller needs to talk to an Etcd's members: the
// client key pair to use and the member pods to dial.
package memberaccess

import (
	"context"
	"errors"
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

// ClientTLS returns the Etcd's own client key pair (clientUrlTls.clientTLSSecretRef with its CA),
// read through reader, else the operator-wide one from defaultTLS (nil when none is configured).
func ClientTLS(ctx context.Context, reader client.Reader, etcd *druidv1alpha1.Etcd, defaultTLS func() (conductortls.ClientMaterial, error)) (conductortls.ClientMaterial, error) {
	t := etcd.Spec.Etcd.ClientUrlTLS
	if t == nil || t.ClientTLSSecretRef.Name == "" {
		if defaultTLS == nil {
			return conductortls.ClientMaterial{}, errors.New("Etcd names no clientUrlTls.clientTLSSecretRef and the operator has no memberClientTLS configured")
		}
		return defaultTLS()
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
