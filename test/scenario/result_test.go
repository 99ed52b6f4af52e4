package scenario

import (
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/figures"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// Every figure comes from the report field it names, none stays at zero or takes another's
// value: each input is a distinct number. The figures derived before (the idle jitter, the gap at
// the leader step) are kept.
func TestResultFiguresFromReport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		report  workload.Report
		derived figures.Rollout
		took    time.Duration
		want    figures.Rollout
	}{
		{
			name: "every figure from its field",
			report: workload.Report{
				QuorumLossMs: 1, QuorumUnconfirmedMs: 2, ProbeTimeouts: 3, ProbeRefusals: 4, LongestWriteGapMs: 5,
				FailedWrites: 6, WriteTimeouts: 7, WriteRefusals: 8, AckedWrites: 9, LostAckedWrites: 10,
				AuditError: "eleven", LeaderChanges: 12, TermIncrements: 13,
			},
			derived: figures.Rollout{LeaderStepGapMs: 14, IdleJitterMs: 15},
			took:    16 * time.Second,
			want: figures.Rollout{
				QuorumLossMs: 1, QuorumUnconfirmedMs: 2, ProbeTimeouts: 3, ProbeRefusals: 4, LongestWriteGapMs: 5,
				LeaderStepGapMs: 14, IdleJitterMs: 15, FailedWrites: 6, WriteTimeouts: 7, WriteRefusals: 8,
				AckedWrites: 9, LostAckedWrites: 10, AuditError: "eleven", LeaderChanges: 12, TermIncrements: 13,
				RolloutSeconds: 16,
			},
		},
		{
			name:    "an empty report keeps the derived figures",
			derived: figures.Rollout{LeaderStepGapMs: 30, IdleJitterMs: 20},
			took:    1500 * time.Millisecond,
			want:    figures.Rollout{LeaderStepGapMs: 30, IdleJitterMs: 20, RolloutSeconds: 1.5},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Result{Report: tc.report, Rollout: tc.derived}
			r.fill()
			r.setDuration(tc.took)
			if r.Rollout != tc.want {
				t.Errorf("figures\n got %+v\nwant %+v", r.Rollout, tc.want)
			}
			if r.Duration != tc.took {
				t.Errorf("Duration = %s, want %s", r.Duration, tc.took)
			}
		})
	}
}
