package v1alpha1

import (
	"strings"
	"testing"
	"time"
)

// decodeCase is one Decode input: check runs on success, wantErr is a substring of the error.
type decodeCase struct {
	name    string
	data    string
	check   func(t *testing.T, c *OperatorConfiguration)
	wantErr string
}

// runDecodeCases decodes each case in parallel and checks its error or its result.
func runDecodeCases(t *testing.T, tests []decodeCase) {
	t.Helper()
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

func TestDecode(t *testing.T) {
	policyHeader := "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\n"
	tests := []decodeCase{
		{
			name: "rollout policy defaults",
			data: policyHeader,
			check: func(t *testing.T, c *OperatorConfiguration) {
				o := c.Controllers.OnDelete
				if o.Handover.Enabled == nil || !*o.Handover.Enabled || o.Handover.Timeout.Duration != 5*time.Second || o.Handover.MaxAttempts != 3 ||
					o.MaxAppliedIndexLag == nil || *o.MaxAppliedIndexLag != 1000 || o.MaxConcurrentMemberUpdates != 1 {
					t.Errorf("rollout policy defaults %+v", o)
				}
			},
		},
		{
			name: "rollout policy set",
			data: policyHeader + "controllers:\n  ondelete:\n    handover: {enabled: false, timeout: 2s, maxAttempts: 1}\n    maxAppliedIndexLag: -1\n    maxConcurrentMemberUpdates: 2\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				o := c.Controllers.OnDelete
				if *o.Handover.Enabled || o.Handover.Timeout.Duration != 2*time.Second || o.Handover.MaxAttempts != 1 ||
					*o.MaxAppliedIndexLag != -1 || o.MaxConcurrentMemberUpdates != 2 {
					t.Errorf("rollout policy %+v", o)
				}
			},
		},
		{
			name: "waiting for the backup: on by default",
			data: policyHeader,
			check: func(t *testing.T, c *OperatorConfiguration) {
				if w := c.Controllers.Etcd.WaitForBackupReady; w == nil || !*w {
					t.Errorf("waitForBackupReady = %v, want true", w)
				}
			},
		},
		{
			name: "waiting for the backup: off",
			data: policyHeader + "controllers:\n  etcd:\n    waitForBackupReady: false\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if w := c.Controllers.Etcd.WaitForBackupReady; w == nil || *w {
					t.Errorf("waitForBackupReady = %v, want false", w)
				}
			},
		},
		{
			name: "member reports: the policy named, not trusted without it by default",
			data: policyHeader + "memberReports:\n  admissionPolicy: etcd-conductor-member-report\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if r := c.MemberReports; r.AdmissionPolicy != "etcd-conductor-member-report" || r.TrustUnauthenticated {
					t.Errorf("memberReports = %+v", r)
				}
			},
		},
		{name: "member reports: not an object name", data: policyHeader + "memberReports:\n  admissionPolicy: Not_A_Name\n", wantErr: "memberReports.admissionPolicy"},
		{name: "member reports: a typo", data: policyHeader + "memberReports:\n  trustUnauthenticate: true\n", wantErr: `unknown field "memberReports.trustUnauthenticate"`},
		{name: "waiting for the backup: not a boolean", data: policyHeader + "controllers:\n  etcd:\n    waitForBackupReady: sometimes\n", wantErr: "waitForBackupReady"},
		{name: "handover typo", data: policyHeader + "controllers:\n  ondelete:\n    handover: {enable: true}\n", wantErr: `unknown field "controllers.ondelete.handover.enable"`},
		{name: "zero handover timeout", data: policyHeader + "controllers:\n  ondelete:\n    handover: {timeout: 0s}\n", wantErr: "controllers.ondelete.handover.timeout must be a positive duration"},
		{name: "negative attempts", data: policyHeader + "controllers:\n  ondelete:\n    handover: {maxAttempts: -1}\n", wantErr: "controllers.ondelete.handover.maxAttempts must be positive"},
		{name: "lag below -1", data: policyHeader + "controllers:\n  ondelete:\n    maxAppliedIndexLag: -2\n", wantErr: "maxAppliedIndexLag must be -1 (gate off) or at least 0"},
		{name: "concurrency beyond any headroom", data: policyHeader + "controllers:\n  ondelete:\n    maxConcurrentMemberUpdates: 5\n", wantErr: "maxConcurrentMemberUpdates must be between 1 and 4"},
		{name: "concurrency zero", data: policyHeader + "controllers:\n  ondelete:\n    maxConcurrentMemberUpdates: 0\n", wantErr: "maxConcurrentMemberUpdates must be between 1 and 4"},
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
			wantErr: `unknown field "controllers.ondelete.concurentSyncs"`,
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
	// Each of these used to be accepted: a wrong-case key silently set (or failed to set) the
	// field, a repeated key or a second document silently won or vanished, and a zero, negative
	// or empty value started a manager that could not work.
	const header = "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\n"
	for _, tc := range []struct{ name, data, wantErr string }{
		{"wrong-case top-level key", header + "FeatureGates:\n  QuorumAwareUpdatesWithOnDelete: true\n", `unknown field "FeatureGates"`},
		{"lower-case key", header + "leaderelection:\n  enabled: true\n", `unknown field "leaderelection"`},
		{"wrong-case nested key", header + "controllers:\n  OnDelete:\n    concurrentSyncs: 2\n", `unknown field "controllers.OnDelete"`},
		{"wrong-case leaf key", header + "memberClientTLS: {cafile: /a, certFile: /b, keyFile: /c}\n", `unknown field "memberClientTLS.cafile"`},
		{"duplicate key", header + "featureGates: {}\nfeatureGates:\n  QuorumAwareUpdatesWithOnDelete: true\n", `"featureGates" already set`},
		{"duplicate nested key", header + "controllers:\n  etcd:\n    concurrentSyncs: 1\n    concurrentSyncs: 5\n", `"concurrentSyncs" already set`},
		{"duplicate key in JSON", `{"apiVersion":"config.druid.gardener.cloud/v1alpha1","kind":"OperatorConfiguration","featureGates":{},"featureGates":{}}`, `"featureGates" already set`},
		{"trailing document", header + "---\n" + header + "featureGates:\n  QuorumAwareUpdatesWithOnDelete: true\n", "a second YAML document starts at line 3"},
		{"trailing document after an end marker", header + "...\n---\n" + header, "a second YAML document"},
		{"zero concurrentSyncs", header + "controllers:\n  etcd:\n    concurrentSyncs: 0\n", "controllers.etcd.concurrentSyncs must be positive, got 0"},
		{"negative concurrentSyncs", header + "controllers:\n  ondelete:\n    concurrentSyncs: -1\n", "controllers.ondelete.concurrentSyncs must be positive, got -1"},
		{"negative requeueInterval", header + "controllers:\n  ondelete:\n    requeueInterval: -5s\n", "controllers.ondelete.requeueInterval must be a positive duration, got -5s"},
		{"zero requeueInterval", header + "controllers:\n  ondelete:\n    requeueInterval: 0s\n", "controllers.ondelete.requeueInterval must be a positive duration"},
		{"zero leaseDuration", header + "leaderElection:\n  leaseDuration: 0s\n", "leaderElection.leaseDuration must be a positive duration"},
		{"negative retryPeriod", header + "leaderElection:\n  retryPeriod: -1s\n", "leaderElection.retryPeriod must be a positive duration"},
		{"leaseDuration not above renewDeadline", header + "leaderElection:\n  leaseDuration: 5s\n", "leaderElection.leaseDuration (5s) must be longer than leaderElection.renewDeadline (10s)"},
		{"renewDeadline too close to retryPeriod", header + "leaderElection:\n  retryPeriod: 9s\n", "leaderElection.renewDeadline (10s) must be longer than 1.2"},
		{"not a duration", header + "leaderElection:\n  retryPeriod: soon\n", "soon"},
		{"empty memberClientTLS", header + "memberClientTLS: {}\n", "missing memberClientTLS.caFile, memberClientTLS.certFile, memberClientTLS.keyFile"},
		{"memberClientTLS without value", header + "memberClientTLS:\n", "memberClientTLS has no value"},
		{"memberClientTLS with only caFile", header + "memberClientTLS: {caFile: /tls/ca.crt}\n", "missing memberClientTLS.certFile, memberClientTLS.keyFile"},
		{"memberClientTLS with an empty keyFile", header + "memberClientTLS: {caFile: /a, certFile: /b, keyFile: \"\"}\n", "missing memberClientTLS.keyFile"},
		{"empty memberRoleSource", header + "controllers:\n  ondelete:\n    memberRoleSource: \"\"\n", `memberRoleSource must be "Auto" or "LeaseOnly", got ""`},
		{"wrong-case memberRoleSource", header + "controllers:\n  ondelete:\n    memberRoleSource: auto\n", `got "auto"`},
		{"nested key without value", header + "controllers:\n  etcd:\n", "controllers.etcd has no value"},
		{"empty file", "", "the configuration is empty"},
		{"empty metricsBindAddress", header + "metricsBindAddress: \"\"\n", `metricsBindAddress must not be empty ("0" disables it)`},
		{"zero qps", header + "clientConnection:\n  qps: 0\n", "clientConnection.qps must be positive, got 0"},
		{"negative qps", header + "clientConnection:\n  qps: -5\n", "clientConnection.qps must be positive, got -5"},
		{"negative burst", header + "clientConnection:\n  burst: -1\n", "clientConnection.burst must be positive, got -1"},
		{"burst below qps", header + "clientConnection: {qps: 200, burst: 150}\n", "clientConnection.burst (150) must be at least clientConnection.qps (200)"},
		{"wrong-case clientConnection key", header + "clientConnection:\n  QPS: 50\n", `unknown field "clientConnection.QPS"`},
		{"qps not a number", header + "clientConnection:\n  qps: fast\n", "clientConnection.qps"},
	} {
		tests = append(tests, decodeCase{name: tc.name, data: tc.data, wantErr: tc.wantErr})
	}
	accepted := func(t *testing.T, c *OperatorConfiguration) {
		if c.Controllers.Etcd.ConcurrentSyncs != 3 || c.LeaderElection.LeaseDuration.Duration != 15*time.Second {
			t.Errorf("defaults not applied: %+v", c)
		}
	}
	tests = append(tests, []decodeCase{
		{name: "leading document marker", data: "---\n" + header, check: accepted},
		{name: "trailing empty document", data: header + "---\n", check: accepted},
		{name: "comments around the document", data: "# operator\n" + header + "# end\n---\n# nothing here\n", check: accepted},
		{name: "JSON", data: `{"apiVersion":"config.druid.gardener.cloud/v1alpha1","kind":"OperatorConfiguration"}`, check: accepted},
		{name: "client connection", data: header + "clientConnection: {qps: 50.5, burst: 80}\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.ClientConnection.QPS != 50.5 || c.ClientConnection.Burst != 80 {
					t.Errorf("clientConnection not decoded: %+v", c.ClientConnection)
				}
			}},
		{name: "client connection defaults", data: header,
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.ClientConnection.QPS != DefaultClientQPS || c.ClientConnection.Burst != DefaultClientBurst {
					t.Errorf("clientConnection defaults not applied: %+v", c.ClientConnection)
				}
			}},
		{name: "complete client TLS and leader election timings", data: header +
			"memberClientTLS: {caFile: /tls/ca.crt, certFile: /tls/tls.crt, keyFile: /tls/tls.key}\n" +
			"leaderElection: {enabled: true, leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 5s}\n",
			check: func(t *testing.T, c *OperatorConfiguration) {
				if c.MemberClientTLS == nil || c.MemberClientTLS.KeyFile != "/tls/tls.key" || c.LeaderElection.RetryPeriod.Duration != 5*time.Second {
					t.Errorf("fields not decoded: %+v %+v", c.MemberClientTLS, c.LeaderElection)
				}
			}},
	}...)
	runDecodeCases(t, tests)
}

// TestBackupStores: backupStores decodes into the allow-list internal/store/backupstore checks, and one
// that cannot be used stops the manager at start-up with the field named.
func TestBackupStores(t *testing.T) {
	head := "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\n"
	cfg, err := Decode([]byte(head + "backupStores:\n  localRoots: [/srv/etcd]\n  endpoints: [{host: \"*.s3.example\"}, {host: \"127.0.0.1:9000\", allowInsecure: true}]\n  maxCopyObjectBytes: 1048576\n"))
	if err != nil {
		t.Fatal(err)
	}
	reach := cfg.BackupStores.Reach()
	if len(reach.LocalRoots) != 1 || len(reach.Endpoints) != 2 || !reach.Endpoints[1].AllowInsecure || cfg.BackupStores.MaxCopyObjectBytes != 1<<20 {
		t.Errorf("reach %+v, config %+v", reach, cfg.BackupStores)
	}
	for _, tt := range []struct{ name, yaml, want string }{
		{"nested roots", "backupStores:\n  localRoots: [/srv, /srv/etcd]\n", "lies inside"},
		{"a URL as host", "backupStores:\n  endpoints: [{host: \"https://s3.example\"}]\n", "backupStores.endpoints[0].host"},
		{"a limit above what an upload takes", "backupStores:\n  maxCopyObjectBytes: 999999999999999\n", "backupStores.maxCopyObjectBytes"},
		{"an unknown key", "backupStores:\n  localroots: [/srv]\n", "localroots"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode([]byte(head + tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}
