package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/etcd-conductor/etcd-conductor/internal/features"
)

// druidTestdata is where the configuration package keeps its files written for etcd-druid.
const druidTestdata = "../../internal/api/config/v1alpha1/testdata"

// TestLoadConfigDruidFiles: a file written for etcd-druid, its feature gates included, starts
// the manager's configuration, and the keys ignored are said in exactly one log line.
func TestLoadConfigDruidFiles(t *testing.T) {
	tests := []struct {
		file        string
		wantIgnored []string
	}{
		{file: "druid-every-key.yaml", wantIgnored: []string{"controllers.compaction", "featureGates.UseEtcdWrapper"}},
		{file: "druid-chart-rendered.yaml", wantIgnored: []string{"clientConnection.acceptContentType", "featureGates.UpgradeEtcdVersion", "logConfiguration"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfg, gates, err := loadConfig(filepath.Join(druidTestdata, tt.file))
			if err != nil {
				t.Fatalf("loadConfig() error = %v", err)
			}
			if gates.Enabled(features.QuorumAwareUpdatesWithOnDelete) {
				t.Errorf("gates = %s, want every gate of etcd-conductor's at its default", gates)
			}
			var lines []string
			log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
			logIgnored(log, cfg)
			if len(lines) != 1 {
				t.Fatalf("logIgnored wrote %d lines, want 1: %q", len(lines), lines)
			}
			for _, path := range tt.wantIgnored {
				if !strings.Contains(lines[0], `"`+path+": ") {
					t.Errorf("the log line does not name %s with why: %s", path, lines[0])
				}
			}
		})
	}
}

// TestLoadConfigFeatureGates: etcd-druid's gates are accepted, a name neither etcd-druid nor
// etcd-conductor has is refused by name.
func TestLoadConfigFeatureGates(t *testing.T) {
	const header = "apiVersion: config.druid.gardener.cloud/v1alpha1\nkind: OperatorConfiguration\n"
	tests := []struct {
		name, config, wantErr string
		wantOnDelete          bool
	}{
		{name: "druid's and ours", config: header + "featureGates: {UpgradeEtcdVersion: true, QuorumAwareUpdatesWithOnDelete: true}\n", wantOnDelete: true},
		{name: "misspelled druid gate", config: header + "featureGates: {UpgradeEtcdVersio: true}\n", wantErr: "UpgradeEtcdVersio"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
				t.Fatal(err)
			}
			_, gates, err := loadConfig(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("loadConfig() error = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig() error = %v", err)
			}
			if got := gates.Enabled(features.QuorumAwareUpdatesWithOnDelete); got != tt.wantOnDelete {
				t.Errorf("QuorumAwareUpdatesWithOnDelete = %t, want %t", got, tt.wantOnDelete)
			}
		})
	}
}
