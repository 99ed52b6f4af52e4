package v1alpha1

import (
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		check   func(t *testing.T, c *OperatorConfiguration)
		wantErr string
	}{
		{
			name: "full configuration",
			data: `
apiVersion: config.druid.gardener.cloud/v1alpha1
kind: OperatorConfiguration
leaderElection:
  enabled: true
  resourceNamespace: kube-system
controllers:
  etcd:
    concurrentSyncs: 5
  ondelete:
    concurrentSyncs: 2
    memberRoleSource: LeaseOnly
featureGates:
  QuorumAwareUpdatesWithOnDelete: true
`,
			check: func(t *testing.T, c *OperatorConfiguration) {
				if !c.LeaderElection.Enabled || c.Controllers.Etcd.ConcurrentSyncs != 5 || c.Controllers.OnDelete.ConcurrentSyncs != 2 {
					t.Errorf("fields not decoded: %+v", c)
				}
				if c.Controllers.OnDelete.MemberRoleSource != MemberRoleSourceLeaseOnly {
					t.Errorf("memberRoleSource = %q", c.Controllers.OnDelete.MemberRoleSource)
				}
				if !c.FeatureGates["QuorumAwareUpdatesWithOnDelete"] {
					t.Errorf("featureGates not decoded: %v", c.FeatureGates)
				}
			},
		},
		{
			name: "defaults",
			data: "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.Controllers.OnDelete.MemberRoleSource != MemberRoleSourceAuto || c.Controllers.Etcd.ConcurrentSyncs != 3 ||
					c.Controllers.OnDelete.RequeueInterval.Duration != 5*time.Second {
					t.Errorf("defaults not applied: %+v", c.Controllers)
				}
			},
		},
		{
			name:    "unknown top-level field is named",
			data:    "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\nfeatureGate: {}\n",
			wantErr: `unknown field "featureGate"`,
		},
		{
			name:    "unknown nested field is named",
			data:    "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\ncontrollers:\n  ondelete:\n    concurentSyncs: 1\n",
			wantErr: `unknown field "concurentSyncs"`,
		},
		{
			name:    "bad role source",
			data:    "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\ncontrollers:\n  ondelete:\n    memberRoleSource: Sometimes\n",
			wantErr: "Sometimes",
		},
		{
			name: "watch namespaces and metrics certificates",
			data: "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\nwatchNamespaces: [team-a, team-b]\nmetricsCertDir: /tls\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if strings.Join(c.WatchNamespaces, ",") != "team-a,team-b" || c.MetricsCertDir != "/tls" {
					t.Errorf("fields not decoded: watchNamespaces %v, metricsCertDir %q", c.WatchNamespaces, c.MetricsCertDir)
				}
				if c.MetricsBindAddress != ":8443" {
					t.Errorf("metricsBindAddress defaults to %q, want :8443", c.MetricsBindAddress)
				}
			},
		},
		{
			name:    "watch namespace that is no namespace name",
			data:    "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\nwatchNamespaces: [Team_A]\n",
			wantErr: `watchNamespaces[0] "Team_A" is not a namespace name`,
		},
		{
			name:    "watch namespace listed twice",
			data:    "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\nwatchNamespaces: [a, b, a]\n",
			wantErr: `watchNamespaces[2] "a" is listed twice`,
		},
		{
			name:    "wrong kind",
			data:    "apiVersion: v1\nkind: ConfigMap\n",
			wantErr: "expected apiVersion",
		},
		{
			name:    "not YAML",
			data:    "{{{",
			wantErr: "operator configuration",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Decode([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decode() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode() error = %v", err)
			}
			tt.check(t, c)
		})
	}
}
