package etcd

import (
	"testing"
	"time"
)

func TestSoonestRecheckWins(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rechecks []recheck
		want     time.Duration
	}{
		{name: "none", want: 0},
		{name: "one", rechecks: []recheck{{lingeringLeaseRecheck, "lease"}}, want: lingeringLeaseRecheck},
		{
			name:     "a broken backup Secret does not slow a downgrade in flight",
			rechecks: []recheck{{versionChangeRecheck, "version"}, {invalidInputRetry, "warnings"}},
			want:     versionChangeRecheck,
		},
		{
			name:     "nor a trust step in flight",
			rechecks: []recheck{{trustStepRecheck, "trust"}, {invalidInputRetry, "warnings"}},
			want:     trustStepRecheck,
		},
		{
			name:     "the order asked in does not matter",
			rechecks: []recheck{{invalidInputRetry, "warnings"}, {volumeChangeRecheck, "volume"}, {transportMoveRecheck, "transport"}, {versionChangeRecheck, "version"}},
			want:     versionChangeRecheck,
		},
		{
			name:     "a hold is the soonest of all",
			rechecks: []recheck{{holdRecheck, "hold"}, {versionChangeRecheck, "version"}, {invalidInputRetry, "warnings"}},
			want:     holdRecheck,
		},
		{name: "zero asks nothing", rechecks: []recheck{{0, "trust off"}, {defaultTrustRecheck, "trust"}}, want: defaultTrustRecheck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := soonest(tc.rechecks).after; got != tc.want {
				t.Errorf("soonest = %s, want %s", got, tc.want)
			}
		})
	}
}
