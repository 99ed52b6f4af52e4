package helm

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
)

// The member NetworkPolicy: one per namespace holding Etcds, selecting exactly the member pods
// the operator builds and naming the ports as their containers do, with the metrics ports open
// only to metricsFrom and the peer port only to member pods.
func TestMemberNetworkPolicyRendering(t *testing.T) {
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: "team-a"}}
	etcd.Spec.Replicas = 3
	sts, err := resources.StatefulSet(etcd, resources.Settings{MemberAgentImage: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	podPorts := map[string]bool{}
	for _, c := range sts.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			podPorts[p.Name] = true
		}
	}
	podPorts["backup-metrics"] = true // the member-agent's, on Etcds with a backup store

	t.Run("every namespace watched: only those listed", func(t *testing.T) {
		if n := splitManifests(t, render(t, nil)).count("NetworkPolicy"); n != 0 {
			t.Errorf("default render: %d NetworkPolicies, want none (no namespace known)", n)
		}
		ms := splitManifests(t, render(t, nil, "--set", "memberNetworkPolicy.namespaces={team-a,team-b}"))
		for _, ns := range []string{"team-a", "team-b"} {
			if _, ok := ms.named("NetworkPolicy", ns, fullname+"-members"); !ok {
				t.Errorf("no NetworkPolicy in %s", ns)
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		if n := splitManifests(t, render(t, []string{testdataPath(t, "namespaced.values.yaml")}, "--set", "memberNetworkPolicy.enabled=false")).count("NetworkPolicy"); n != 0 {
			t.Errorf("disabled: %d NetworkPolicies", n)
		}
	})
	ms := splitManifests(t, render(t, []string{testdataPath(t, "namespaced.values.yaml")}))
	for _, ns := range []string{"team-a", "team-b"} {
		m, ok := ms.named("NetworkPolicy", ns, fullname+"-members")
		if !ok {
			t.Fatalf("no NetworkPolicy in watched namespace %s", ns)
		}
		np := &networkingv1.NetworkPolicy{}
		decodeStrict(t, m, np)
		selector, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		if !selector.Matches(labels.Set(sts.Spec.Template.Labels)) {
			t.Errorf("%s: selector %s does not select the member pods %v", ns, selector, sts.Spec.Template.Labels)
		}
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("%s: policy types %v", ns, np.Spec.PolicyTypes)
		}
		from := map[string][]networkingv1.NetworkPolicyPeer{}
		anyone := map[string]bool{}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port == nil || !podPorts[p.Port.StrVal] || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
					t.Errorf("%s: port %+v is no member container port %v", ns, p, podPorts)
					continue
				}
				from[p.Port.StrVal] = append(from[p.Port.StrVal], rule.From...)
				anyone[p.Port.StrVal] = anyone[p.Port.StrVal] || len(rule.From) == 0
			}
		}
		if anyone["peer"] || len(from["peer"]) != 1 || from["peer"][0].PodSelector == nil || !mustSelector(t, from["peer"][0].PodSelector).Matches(labels.Set(sts.Spec.Template.Labels)) ||
			from["peer"][0].NamespaceSelector != nil {
			t.Errorf("%s: peer port from %+v, want the member pods of the namespace only", ns, from["peer"])
		}
		for _, port := range []string{"metrics", "backup-metrics"} {
			if anyone[port] || len(from[port]) != 1 || from[port][0].NamespaceSelector == nil ||
				from[port][0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
				t.Errorf("%s: %s port from %+v, want the monitoring namespace only", ns, port, from[port])
			}
		}
		if !anyone["client"] {
			t.Errorf("%s: client port from %+v, want anyone by default (mTLS)", ns, from["client"])
		}
	}
}

func mustSelector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}
