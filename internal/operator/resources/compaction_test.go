package resources

import (
	"testing"

	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// Auto-compaction defaults to etcd-druid's (periodic, 30m) wherever a retention is missing, and
// explicit settings are kept as written.
func TestAutoCompactionDefaultsToDruids(t *testing.T) {
	periodic, revision := druidv1alpha1.CompactionPeriodic, druidv1alpha1.CompactionRevision
	for _, tt := range []struct {
		name                    string
		shared                  *druidv1alpha1.SharedConfig
		wantMode, wantRetention string // "" means: absent, etcd's default
	}{
		{name: "no sharedConfig", wantMode: "periodic", wantRetention: "30m"},
		{name: "empty sharedConfig", shared: &druidv1alpha1.SharedConfig{}, wantMode: "periodic", wantRetention: "30m"},
		{name: "periodic without retention", shared: &druidv1alpha1.SharedConfig{AutoCompactionMode: &periodic}, wantMode: "periodic", wantRetention: "30m"},
		{
			// Unchanged from before the default, so such an Etcd does not roll: etcd's
			// default mode is periodic already.
			name:   "retention without mode",
			shared: &druidv1alpha1.SharedConfig{AutoCompactionRetention: ptr.To("1h")}, wantRetention: "1h",
		},
		{
			name:   "retention 0 turns it off",
			shared: &druidv1alpha1.SharedConfig{AutoCompactionMode: &periodic, AutoCompactionRetention: ptr.To("0")}, wantMode: "periodic", wantRetention: "0",
		},
		{
			name:   "explicit revision",
			shared: &druidv1alpha1.SharedConfig{AutoCompactionMode: &revision, AutoCompactionRetention: ptr.To("1000")}, wantMode: "revision", wantRetention: "1000",
		},
		{
			// 30m is no revision count: etcd would refuse it, so etcd's default (off) stays.
			name:   "revision without retention",
			shared: &druidv1alpha1.SharedConfig{AutoCompactionMode: &revision}, wantMode: "revision",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := testEtcd(3)
			e.Spec.SharedConfig = tt.shared
			env := EtcdEnvironment(e)
			for k, want := range map[string]string{"ETCD_AUTO_COMPACTION_MODE": tt.wantMode, "ETCD_AUTO_COMPACTION_RETENTION": tt.wantRetention} {
				if got, ok := env[k]; got != want || (want == "" && ok) {
					t.Errorf("%s = %q (set: %v), want %q", k, got, ok, want)
				}
			}
			if problems := ValidateSpec(e); len(problems) > 0 {
				t.Errorf("the default must be valid: %v", problems)
			}
		})
	}
}
