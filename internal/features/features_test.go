package features

import (
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]bool
		wantOn    bool
		wantErr   string
	}{
		{name: "default is off", overrides: nil, wantOn: false},
		{name: "enabled", overrides: map[string]bool{"QuorumAwareUpdatesWithOnDelete": true}, wantOn: true},
		{name: "explicitly disabled", overrides: map[string]bool{"QuorumAwareUpdatesWithOnDelete": false}, wantOn: false},
		{name: "unknown gate is named", overrides: map[string]bool{"QuorumAwareUpdatesWithOnDlete": true}, wantErr: "QuorumAwareUpdatesWithOnDlete"},
		{name: "case matters", overrides: map[string]bool{"quorumawareupdateswithondelete": true}, wantErr: "quorumawareupdateswithondelete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := New(tt.overrides)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New() error = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			if got := g.Enabled(QuorumAwareUpdatesWithOnDelete); got != tt.wantOn {
				t.Errorf("Enabled() = %v, want %v", got, tt.wantOn)
			}
		})
	}
}

func TestGatesAreIndependentValues(t *testing.T) {
	on := mustNew(map[string]bool{"QuorumAwareUpdatesWithOnDelete": true})
	off := mustNew(nil)
	if !on.Enabled(QuorumAwareUpdatesWithOnDelete) || off.Enabled(QuorumAwareUpdatesWithOnDelete) {
		t.Fatalf("gates leak between values: on=%v off=%v", on, off)
	}
	var zero Gates
	if zero.Enabled(QuorumAwareUpdatesWithOnDelete) {
		t.Errorf("zero Gates must hold defaults (off)")
	}
	if got := on.String(); got != "QuorumAwareUpdatesWithOnDelete=true" {
		t.Errorf("String() = %q", got)
	}
}

// mustNew is New for literals known to be valid.
func mustNew(overrides map[string]bool) Gates {
	g, err := New(overrides)
	if err != nil {
		panic(err)
	}
	return g
}
