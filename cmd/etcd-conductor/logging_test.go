package main

import (
	"testing"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
)

// TestConfiguredLoggerLevels: etcd-druid's logging.logLevel decides which lines are written: debug
// shows V(1), info (and nothing set) info and errors, error only errors.
func TestConfiguredLoggerLevels(t *testing.T) {
	for _, tt := range []struct {
		name             string
		cfg              *configv1alpha1.LogConfiguration
		wantV1, wantInfo bool
	}{
		{"nothing set", nil, false, true},
		{"info", &configv1alpha1.LogConfiguration{LogLevel: configv1alpha1.LogLevelInfo}, false, true},
		{"debug", &configv1alpha1.LogConfiguration{LogLevel: configv1alpha1.LogLevelDebug}, true, true},
		{"error", &configv1alpha1.LogConfiguration{LogLevel: configv1alpha1.LogLevelError, LogFormat: configv1alpha1.LogFormatText}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := newConfiguredLogger(false, tt.cfg)
			if got := log.V(1).Enabled(); got != tt.wantV1 {
				t.Errorf("V(1) enabled %v, want %v", got, tt.wantV1)
			}
			if got := log.Enabled(); got != tt.wantInfo {
				t.Errorf("info enabled %v, want %v", got, tt.wantInfo)
			}
		})
	}
}
