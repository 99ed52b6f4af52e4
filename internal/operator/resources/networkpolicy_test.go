package resources

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// The member NetworkPolicy selects exactly the Etcd's member pods, names the ports as their
// containers do, opens the peer port to that Etcd's pods alone (not a sibling Etcd's in the same
// namespace), the metrics ports only to metricsFrom, the client port to clientFrom or anyone.
func TestMemberNetworkPolicy(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "team-a"}}
	etcd.Spec.Replicas = 3
	etcd.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("S3")), Container: ptr.To("bucket")}}
	sibling := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-events", Namespace: "team-a"}}
	podLabels := func(e *druidv1alpha1.Etcd) labels.Set {
		sts, err := StatefulSet(e, Settings{MemberAgentImage: "agent"})
		if err != nil {
			t.Fatal(err)
		}
		return sts.Spec.Template.Labels
	}
	sts, err := StatefulSet(etcd, Settings{MemberAgentImage: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	podPorts := map[string]bool{}
	for _, c := range sts.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			podPorts[p.Name] = true
		}
	}
	monitoring := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}
	clients := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}

	for _, tc := range []struct {
		name        string
		fence       MemberFence
		wantClient  []networkingv1.NetworkPolicyPeer // nil: anyone
		wantMetrics []networkingv1.NetworkPolicyPeer // nil: nobody
	}{
		{name: "defaults of the chart", fence: MemberFence{MetricsFrom: []networkingv1.NetworkPolicyPeer{monitoring}}, wantMetrics: []networkingv1.NetworkPolicyPeer{monitoring}},
		{name: "clients listed, metrics closed", fence: MemberFence{ClientFrom: []networkingv1.NetworkPolicyPeer{clients}}, wantClient: []networkingv1.NetworkPolicyPeer{clients}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := MemberNetworkPolicy(etcd, tc.fence)
			if np.Namespace != etcd.Namespace || np.Name != "etcd-main-members" || np.Labels[LabelManagedBy] != ManagerName {
				t.Errorf("metadata %+v", np.ObjectMeta)
			}
			if !mustSelector(t, &np.Spec.PodSelector).Matches(podLabels(etcd)) || mustSelector(t, &np.Spec.PodSelector).Matches(podLabels(sibling)) {
				t.Errorf("selector %v: want the member pods of %s alone", np.Spec.PodSelector, etcd.Name)
			}
			if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
				t.Errorf("policy types %v", np.Spec.PolicyTypes)
			}
			from := map[string][]networkingv1.NetworkPolicyPeer{}
			anyone := map[string]bool{}
			for _, rule := range np.Spec.Ingress {
				for _, p := range rule.Ports {
					if p.Port == nil || !podPorts[p.Port.StrVal] || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
						t.Errorf("port %+v is no member container port %v", p, podPorts)
						continue
					}
					from[p.Port.StrVal] = append(from[p.Port.StrVal], rule.From...)
					anyone[p.Port.StrVal] = anyone[p.Port.StrVal] || len(rule.From) == 0
				}
			}
			peer := from["peer"]
			if anyone["peer"] || len(peer) != 1 || peer[0].PodSelector == nil || peer[0].NamespaceSelector != nil ||
				!mustSelector(t, peer[0].PodSelector).Matches(podLabels(etcd)) || mustSelector(t, peer[0].PodSelector).Matches(podLabels(sibling)) {
				t.Errorf("peer port from %+v, want the Etcd's own member pods only", peer)
			}
			for _, port := range []string{"metrics", "backup-metrics"} {
				if anyone[port] || !slices.EqualFunc(from[port], tc.wantMetrics, peerEqual) {
					t.Errorf("%s port from %+v (anyone %v), want %+v", port, from[port], anyone[port], tc.wantMetrics)
				}
			}
			if tc.wantClient == nil != anyone["client"] || !slices.EqualFunc(from["client"], tc.wantClient, peerEqual) {
				t.Errorf("client port from %+v (anyone %v), want %+v", from["client"], anyone["client"], tc.wantClient)
			}
		})
	}
}

func peerEqual(a, b networkingv1.NetworkPolicyPeer) bool {
	return a.NamespaceSelector.String() == b.NamespaceSelector.String() && a.PodSelector.String() == b.PodSelector.String()
}

func mustSelector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}
