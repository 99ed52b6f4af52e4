package resources

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// MemberFence says who may reach an Etcd's member ports (the operator configuration's
// memberNetworkPolicy). Nil: no NetworkPolicy is made.
type MemberFence struct {
	// ClientFrom may reach the client port (mTLS, every client asked for a certificate of the
	// Etcd's CA); empty: anyone. Whoever configures it lists the operator's pods too.
	ClientFrom []networkingv1.NetworkPolicyPeer
	// MetricsFrom may reach the plain-HTTP metrics ports, etcd's and the member-agent's; empty:
	// nobody but the node (the kubelet's probes).
	MetricsFrom []networkingv1.NetworkPolicyPeer
}

// MemberNetworkPolicyName is the NetworkPolicy fencing an Etcd's member pods.
func MemberNetworkPolicyName(e *druidv1alpha1.Etcd) string { return e.Name + "-members" }

// The member containers' port names (statefulset.go, backup.go): a NetworkPolicy that names
// them covers whatever port numbers the Etcd chose.
const (
	portNameClient        = "client"
	portNamePeer          = "peer"
	portNameMetrics       = "metrics"
	portNameBackupMetrics = "backup-metrics"
)

// MemberNetworkPolicy fences e's member pods, made by the operator in e's own namespace so that
// every Etcd is fenced wherever it is created (a chart cannot know the namespaces of an install
// that watches all of them). Ingress only: the peer port from e's own member pods alone (not
// another Etcd's in the namespace); the client port from fence.ClientFrom, or anyone; the metrics
// ports only from fence.MetricsFrom. Any other port of a member pod is closed. The kubelet's
// probes come from the node, which NetworkPolicy implementations admit to the node's own pods.
func MemberNetworkPolicy(e *druidv1alpha1.Etcd, fence MemberFence) *networkingv1.NetworkPolicy {
	port := func(name string) networkingv1.NetworkPolicyPort {
		p := intstr.FromString(name)
		return networkingv1.NetworkPolicyPort{Port: &p}
	}
	members := metav1.LabelSelector{MatchLabels: SelectorLabels(e)}
	np := &networkingv1.NetworkPolicy{ObjectMeta: objectMeta(e, MemberNetworkPolicyName(e))}
	np.Spec = networkingv1.NetworkPolicySpec{
		PodSelector: members,
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{
			{Ports: []networkingv1.NetworkPolicyPort{port(portNamePeer)}, From: []networkingv1.NetworkPolicyPeer{{PodSelector: &members}}},
			{Ports: []networkingv1.NetworkPolicyPort{port(portNameClient)}, From: fence.ClientFrom},
		},
	}
	if len(fence.MetricsFrom) > 0 {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
			Ports: []networkingv1.NetworkPolicyPort{port(portNameMetrics), port(portNameBackupMetrics)}, From: fence.MetricsFrom,
		})
	}
	return np
}
