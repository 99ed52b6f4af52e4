package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

func TestPromiseValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		promise Promise
		wantErr string
	}{
		{"the handover", Handover, ""},
		{"nothing chosen", Promise{}, "without saying why"},
		{"quorum loss left open without a reason", Promise{LeaderChanges: 1}, "without saying why"},
		{"leader changes left open without a reason", Promise{NoQuorumLoss: true, LeaderChanges: AnyLeaderChanges}, "without saying why"},
		{"left open with a reason", Promise{LeaderChanges: AnyLeaderChanges, Waived: "two members dead"}, ""},
		{"a count that means nothing", Promise{NoQuorumLoss: true, LeaderChanges: -2}, "want a count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.promise.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate() = %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}

func TestPromiseBroken(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	lost := workload.Report{QuorumLossMs: 300, QuorumLosses: []workload.Interval{{Start: at, End: at.Add(300 * time.Millisecond), Ms: 300}}, LeaderChanges: 1}
	for _, tc := range []struct {
		name    string
		promise Promise
		report  workload.Report
		want    []string
	}{
		{"kept", Handover, workload.Report{LeaderChanges: 1}, nil},
		{"a quorum loss", Handover, lost, []string{"quorum lost for 300 ms from 10:00:00.000"}},
		{"a quorum loss not promised", Promise{LeaderChanges: 1, Waived: "x"}, lost, nil},
		{"two leader changes", Handover, workload.Report{LeaderChanges: 2}, []string{"2 leader changes, promised exactly 1"}},
		{"no handover at all", Handover, workload.Report{}, []string{"0 leader changes, promised exactly 1"}},
		{"any leader changes", Promise{NoQuorumLoss: true, LeaderChanges: AnyLeaderChanges, Waived: "x"}, workload.Report{LeaderChanges: 3}, nil},
		{"a single member keeps leading", Promise{LeaderChanges: 0, Waived: "x"}, workload.Report{LeaderChanges: 1}, []string{"1 leader changes, promised exactly 0"}},
		{"a loss counted without its interval", Handover, workload.Report{QuorumLossMs: 80, LeaderChanges: 1}, []string{"quorum lost for 80 ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.promise.Broken(tc.report)
			if len(got) != len(tc.want) {
				t.Fatalf("Broken() = %q, want %d findings like %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("finding %d = %q, want it to start with %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}
