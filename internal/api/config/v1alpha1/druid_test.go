package v1alpha1

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ignoredPaths is the key paths of Ignored's lines, in order.
func ignoredPaths(cfg *OperatorConfiguration) []string {
	var paths []string
	for _, line := range Ignored(cfg) {
		path, why, ok := strings.Cut(line, ": ")
		if !ok || why == "" {
			paths = append(paths, "no reason given for "+line)
			continue
		}
		paths = append(paths, path)
	}
	return paths
}

// TestDecodeDruidFiles loads files written for etcd-druid: every key of its type, and the shapes
// its own chart and tests write, keys its type lacks included.
func TestDecodeDruidFiles(t *testing.T) {
	tests := []struct {
		file        string
		check       func(t *testing.T, c *OperatorConfiguration)
		wantIgnored []string
	}{
		{
			file: "druid-every-key.yaml",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.ClientConnection.QPS != 80 || c.ClientConnection.Burst != 120 {
					t.Errorf("clientConnection = %+v, want qps 80, burst 120", c.ClientConnection)
				}
				le := c.LeaderElection
				if !le.Enabled || le.LeaseDuration.Duration != 40*time.Second || le.RenewDeadline.Duration != 30*time.Second ||
					le.RetryPeriod.Duration != 4*time.Second || le.ResourceName != "etcd-leader-lock" {
					t.Errorf("leaderElection = %+v", le)
				}
				if c.MetricsBindAddress != "127.0.0.1:9090" {
					t.Errorf("metricsBindAddress = %q, want server.metrics' 127.0.0.1:9090", c.MetricsBindAddress)
				}
				if c.Controllers.Etcd.ConcurrentSyncs != 7 {
					t.Errorf("controllers.etcd.concurrentSyncs = %d, want 7", c.Controllers.Etcd.ConcurrentSyncs)
				}
				if a := c.Controllers.Etcd.EnableEtcdSpecAutoReconcile; a == nil || !*a {
					t.Errorf("enableEtcdSpecAutoReconcile = %v, want true kept", a)
				}
				if !c.CopyBackupsTaskEnabled() || c.CopyBackupsTaskWorkers() != 4 {
					t.Errorf("etcdCopyBackupsTask enabled %t, workers %d; want true and 4", c.CopyBackupsTaskEnabled(), c.CopyBackupsTaskWorkers())
				}
				if got := c.ConductorFeatureGates(); len(got) != 0 {
					t.Errorf("etcd-druid's gates reach etcd-conductor's: %v", got)
				}
			},
			wantIgnored: []string{
				"clientConnection.contentType", "clientConnection.acceptContentTypes", "server.webhooks",
				"controllers.disableLeaseCache",
				"controllers.etcd.disableEtcdServiceAccountAutomount",
				"controllers.compaction",
				"controllers.secret", "controllers.etcdOpsTask", "webhooks",
				"featureGates.UpgradeEtcdVersion", "featureGates.UseEtcdWrapper",
			},
		},
		{
			file: "druid-chart-rendered.yaml",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.ClientConnection.QPS != 60 || c.ClientConnection.Burst != 90 || c.LeaderElection.Enabled {
					t.Errorf("clientConnection %+v, leaderElection %+v", c.ClientConnection, c.LeaderElection)
				}
				if c.MetricsBindAddress != ":8088" || c.Controllers.Etcd.ConcurrentSyncs != 4 {
					t.Errorf("metricsBindAddress %q, concurrentSyncs %d; want :8088 and 4", c.MetricsBindAddress, c.Controllers.Etcd.ConcurrentSyncs)
				}
				if a := c.Controllers.Etcd.EnableEtcdSpecAutoReconcile; a == nil || *a {
					t.Errorf("enableEtcdSpecAutoReconcile = %v, want false kept", a)
				}
				if c.CopyBackupsTaskEnabled() || c.CopyBackupsTaskWorkers() != 3 {
					t.Errorf("etcdCopyBackupsTask enabled %t, workers %d; want false and 3", c.CopyBackupsTaskEnabled(), c.CopyBackupsTaskWorkers())
				}
			},
			wantIgnored: []string{
				"clientConnection.contentType", "clientConnection.acceptContentType", "server.webhooks",
				"controllers.etcd.disableEtcdServiceAccountAutomount",
				"controllers.compaction",
				"controllers.secret", "controllers.etcdOpsTask", "webhooks",
				"logConfiguration", "featureGates.UpgradeEtcdVersion",
			},
		},
		{
			file: "druid-nested-webhook-server.yaml",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.MetricsBindAddress != ":3751" || c.Controllers.Etcd.ConcurrentSyncs != 2 {
					t.Errorf("metricsBindAddress %q, concurrentSyncs %d; want :3751 and 2", c.MetricsBindAddress, c.Controllers.Etcd.ConcurrentSyncs)
				}
			},
			wantIgnored: []string{"server.webhooks", "logConfiguration"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			c, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode() error = %v", err)
			}
			tt.check(t, c)
			if got := ignoredPaths(c); !slices.Equal(got, tt.wantIgnored) {
				t.Errorf("Ignored() paths =\n  %v\nwant\n  %v", got, tt.wantIgnored)
			}
		})
	}
}

// TestDecodeDruidKeys: etcd-druid's keys are known, but a key neither etcd-druid's type nor its
// files have is still refused by name, and the keys acted on are validated.
func TestDecodeDruidKeys(t *testing.T) {
	const header = "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\n"
	tests := []decodeCase{
		{name: "misspelled druid controller key", data: header + "controllers:\n  compaction:\n    eventThreshold: 5\n",
			wantErr: `unknown field "controllers.compaction.eventThreshold"`},
		{name: "misspelled spec auto reconcile", data: header + "controllers:\n  etcd:\n    enableEtcdSpecAutoReconcille: true\n",
			wantErr: `unknown field "controllers.etcd.enableEtcdSpecAutoReconcille"`},
		{name: "misspelled member threshold", data: header + "controllers:\n  etcd:\n    etcdMember:\n      notReadyTreshold: 1m\n",
			wantErr: `unknown field "controllers.etcd.etcdMember.notReadyTreshold"`},
		{name: "misspelled top-level druid key", data: header + "logConfig:\n  logLevel: info\n", wantErr: `unknown field "logConfig"`},
		{name: "misspelled log key", data: header + "logConfiguration:\n  level: info\n", wantErr: `unknown field "logConfiguration.level"`},
		// druid's own files nest only the port under server.webhooks.server: nothing else is let in.
		{name: "key druid's files do not nest", data: header + "server:\n  webhooks:\n    server:\n      bindAddress: 0.0.0.0\n",
			wantErr: `unknown field "server.webhooks.server.bindAddress"`},
		{name: "wrong-case druid key", data: header + "controllers:\n  EtcdOpsTask: {}\n", wantErr: `unknown field "controllers.EtcdOpsTask"`},
		{name: "druid duration not a duration", data: header + "controllers:\n  etcd:\n    etcdStatusSyncPeriod: often\n", wantErr: "often"},
		{name: "member NotReady threshold negative", data: header + "controllers:\n  etcd:\n    etcdMember:\n      notReadyThreshold: -1m\n",
			wantErr: "controllers.etcd.etcdMember.notReadyThreshold must be a positive duration"},
		{name: "member Unknown threshold negative", data: header + "controllers:\n  etcd:\n    etcdMember:\n      unknownThreshold: -5s\n",
			wantErr: "controllers.etcd.etcdMember.unknownThreshold must be a positive duration"},
		{name: "status sync period not positive", data: header + "controllers:\n  etcd:\n    etcdStatusSyncPeriod: 0s\n", wantErr: "etcdStatusSyncPeriod must be a positive duration"},
		{name: "lock other than leases", data: header + "leaderElection:\n  resourceLock: configmaps\n",
			wantErr: `leaderElection.resourceLock must be "leases" (the manager takes a coordination.k8s.io Lease), got "configmaps"`},
		{name: "metrics port out of range", data: header + "server:\n  metrics:\n    port: 70000\n",
			wantErr: "server.metrics.port must be between 1 and 65535 (0: etcd-druid's default 8080), got 70000"},
		{name: "metrics bind address with a port", data: header + "server:\n  metrics:\n    bindAddress: localhost:8080\n",
			wantErr: `server.metrics.bindAddress must be a host or IP without a port`},
		{name: "leases lock", data: header + "leaderElection:\n  resourceLock: leases\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if got := Ignored(c); len(got) != 0 {
					t.Errorf("resourceLock: leases is honoured, yet Ignored() = %v", got)
				}
			}},
		{name: "druid's metrics port defaults to 8080", data: header + "server:\n  metrics:\n    bindAddress: \"::1\"\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.MetricsBindAddress != "[::1]:8080" {
					t.Errorf("metricsBindAddress = %q, want [::1]:8080", c.MetricsBindAddress)
				}
			}},
		{name: "metricsBindAddress wins over server.metrics", data: header + "metricsBindAddress: \":9443\"\nserver:\n  metrics:\n    port: 8080\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.MetricsBindAddress != ":9443" {
					t.Errorf("metricsBindAddress = %q, want :9443", c.MetricsBindAddress)
				}
				want := []string{"server.metrics: metricsBindAddress (:9443) is set and wins over etcd-druid's :8080"}
				if got := Ignored(c); !slices.Equal(got, want) {
					t.Errorf("Ignored() = %q, want %q", got, want)
				}
			}},
		{name: "metricsBindAddress written with the same address", data: header + "metricsBindAddress: \":8080\"\nserver:\n  metrics: {}\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if got := Ignored(c); len(got) != 0 {
					t.Errorf("Ignored() = %v, want nothing: both keys ask for :8080", got)
				}
			}},
		{name: "copy backups task concurrentSyncs not positive", data: header + "controllers:\n  etcdCopyBackupsTask:\n    enabled: true\n    concurrentSyncs: 0\n",
			wantErr: "controllers.etcdCopyBackupsTask.concurrentSyncs must be positive, got 0"},
		{name: "copy backups task left out: off, etcd-druid's workers", data: header,
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.CopyBackupsTaskEnabled() || c.CopyBackupsTaskWorkers() != DefaultCopyBackupsTaskConcurrentSyncs {
					t.Errorf("enabled %t, workers %d; want false and %d", c.CopyBackupsTaskEnabled(), c.CopyBackupsTaskWorkers(), DefaultCopyBackupsTaskConcurrentSyncs)
				}
			}},
		{name: "copy backups task enabled is honoured, not ignored", data: header + "controllers:\n  etcdCopyBackupsTask:\n    enabled: true\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if !c.CopyBackupsTaskEnabled() || len(Ignored(c)) != 0 {
					t.Errorf("enabled %t, Ignored() %v; want true and nothing", c.CopyBackupsTaskEnabled(), Ignored(c))
				}
			}},
		{name: "logging is honoured, not ignored", data: header + "logging:\n  logLevel: debug\n  logFormat: text\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.Logging == nil || c.Logging.LogLevel != LogLevelDebug || len(Ignored(c)) != 0 {
					t.Errorf("logging %+v, Ignored() %v; want debug/text and nothing", c.Logging, Ignored(c))
				}
			}},
		{name: "unknown log level", data: header + "logging:\n  logLevel: verbose\n", wantErr: `logging.logLevel "verbose": must be debug, info or error`},
		{name: "unknown log format", data: header + "logging:\n  logFormat: xml\n", wantErr: `logging.logFormat "xml": must be json or text`},
		{name: "spec auto reconcile left out", data: header,
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.Controllers.Etcd.EnableEtcdSpecAutoReconcile != nil || len(Ignored(c)) != 0 {
					t.Errorf("enableEtcdSpecAutoReconcile %v, Ignored() %v; want nil and nothing", c.Controllers.Etcd.EnableEtcdSpecAutoReconcile, Ignored(c))
				}
			}},
	}
	runDecodeCases(t, tests)
}

// TestConductorFeatureGates: etcd-druid's gates are taken out; any other name stays for the
// features package to accept or refuse.
func TestConductorFeatureGates(t *testing.T) {
	tests := []struct {
		name  string
		gates map[string]bool
		want  map[string]bool
	}{
		{name: "none", gates: nil, want: map[string]bool{}},
		{name: "druid's only", gates: map[string]bool{"UseEtcdWrapper": true, "UpgradeEtcdVersion": false}, want: map[string]bool{}},
		{name: "ours and druid's", gates: map[string]bool{"QuorumAwareUpdatesWithOnDelete": true, "UpgradeEtcdVersion": true},
			want: map[string]bool{"QuorumAwareUpdatesWithOnDelete": true}},
		{name: "misspelled druid gate stays", gates: map[string]bool{"UpgradeEtcdVersio": true}, want: map[string]bool{"UpgradeEtcdVersio": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &OperatorConfiguration{FeatureGates: tt.gates}
			got := c.ConductorFeatureGates()
			if len(got) != len(tt.want) {
				t.Fatalf("ConductorFeatureGates() = %v, want %v", got, tt.want)
			}
			for name, enabled := range tt.want {
				if v, ok := got[name]; !ok || v != enabled {
					t.Errorf("ConductorFeatureGates() = %v, want %v", got, tt.want)
				}
			}
		})
	}
}
