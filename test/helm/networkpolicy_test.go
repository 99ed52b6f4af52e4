package helm

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The member NetworkPolicy is the operator's to make, beside each Etcd, wherever it is created
// (resources.MemberNetworkPolicy): the chart renders none itself, and passes who may reach the
// member ports to the manager's configuration, the operator's own pods added to clientFrom.
func TestMemberNetworkPolicyConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
	}{
		{name: "every namespace watched"},
		{name: "namespaces listed", values: []string{testdataPath(t, "namespaced.values.yaml")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := splitManifests(t, render(t, tc.values)).count("NetworkPolicy"); n != 0 {
				t.Errorf("the chart rendered %d NetworkPolicies: each Etcd's is the operator's to make", n)
			}
			cfg, _ := renderDecoded(t, tc.values).operatorConfig(t)
			np := cfg.MemberNetworkPolicy
			if np == nil || !np.Enabled {
				t.Fatalf("memberNetworkPolicy %+v, want enabled by default", np)
			}
			if len(np.MetricsFrom) != 1 || np.MetricsFrom[0].NamespaceSelector == nil ||
				np.MetricsFrom[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
				t.Errorf("metricsFrom %+v, want the monitoring namespace", np.MetricsFrom)
			}
			if len(np.ClientFrom) != 0 {
				t.Errorf("clientFrom %+v, want anyone by default (the client port is mTLS)", np.ClientFrom)
			}
		})
	}
	t.Run("clientFrom set: the operator's pods added", func(t *testing.T) {
		r := renderDecoded(t, nil, "--set-json", `memberNetworkPolicy.clientFrom=[{"namespaceSelector":{"matchLabels":{"team":"a"}}}]`)
		cfg, _ := r.operatorConfig(t)
		from := cfg.MemberNetworkPolicy.ClientFrom
		if len(from) != 2 || from[0].NamespaceSelector.MatchLabels["team"] != "a" {
			t.Fatalf("clientFrom %+v, want the peer given and the operator", from)
		}
		operator := from[1]
		pods, err := metav1.LabelSelectorAsSelector(operator.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		if operator.NamespaceSelector == nil || operator.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != releaseNamespace ||
			operator.PodSelector == nil || !pods.Matches(labels.Set(r.deployment.Spec.Template.Labels)) {
			t.Errorf("clientFrom's last peer %+v does not select the manager's pods %v in %s", operator, r.deployment.Spec.Template.Labels, releaseNamespace)
		}
	})
	t.Run("off", func(t *testing.T) {
		cfg, _ := renderDecoded(t, nil, "--set", "memberNetworkPolicy.enabled=false").operatorConfig(t)
		if cfg.MemberNetworkPolicy != nil {
			t.Errorf("memberNetworkPolicy %+v, want none: the operator then removes the ones it made", cfg.MemberNetworkPolicy)
		}
	})
}
