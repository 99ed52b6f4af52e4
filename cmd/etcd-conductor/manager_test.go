package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// TestManagerRejectsBadConfiguration runs the real binary: a bad configuration must stop the
// manager before it connects anywhere, with a non-zero exit and a message naming the problem.
func TestManagerRejectsBadConfiguration(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the binary")
	}
	dir := t.TempDir()
	// The binary `make build` wrote (built then, by `go test` outside make): never a second compile.
	bin, err := localcluster.ProjectBinary()
	if err != nil {
		t.Fatal(err)
	}
	const header = "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\n"
	for _, tt := range []struct {
		name, config, want string
	}{
		{"unknown gate", header + "featureGates:\n  QuorumAwareUpdatesWithOnDlete: true\n", "QuorumAwareUpdatesWithOnDlete"},
		{"unknown field", header + "controllers:\n  ondelete:\n    memberRoleSorce: Auto\n", `unknown field "controllers.ondelete.memberRoleSorce"`},
		{"misspelled etcd-druid key", header + "controllers:\n  compaction:\n    eventThreshold: 5\n", `unknown field "controllers.compaction.eventThreshold"`},
		{"unknown gate of neither", header + "featureGates:\n  UpgradeEtcdVersio: true\n", "UpgradeEtcdVersio"},
		{"bad role source", header + "controllers:\n  ondelete:\n    memberRoleSource: Maybe\n", "Maybe"},
		{"wrong-case key", header + "FeatureGates:\n  QuorumAwareUpdatesWithOnDelete: true\n", `unknown field "FeatureGates"`},
		{"duplicate key", header + "featureGates: {}\nfeatureGates: {}\n", `key "featureGates" already set`},
		{"trailing document", header + "---\n" + header, "a second YAML document"},
		{"empty memberClientTLS", header + "memberClientTLS: {}\n", "missing memberClientTLS.caFile"},
		{"zero concurrentSyncs", header + "controllers:\n  etcd:\n    concurrentSyncs: 0\n", "controllers.etcd.concurrentSyncs must be positive"},
		{"client burst below qps", header + "clientConnection: {qps: 200, burst: 10}\n", "clientConnection.burst (10) must be at least clientConnection.qps (200)"},
		{"missing file", "", "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			if tt.config != "" {
				if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bin, "manager", "--config", path)
			out, err := cmd.CombinedOutput()
			exitErr, ok := err.(*exec.ExitError)
			if !ok || exitErr.ExitCode() == 0 {
				t.Fatalf("manager exited with %v, want a non-zero exit; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("output does not name %q:\n%s", tt.want, out)
			}
			if strings.Count(string(out), "\n") != 1 || !strings.HasSuffix(string(out), "\n") {
				t.Errorf("output is not exactly one line:\n%s", out)
			}
		})
	}
}
