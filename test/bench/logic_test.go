package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
	"github.com/etcd-conductor/etcd-conductor/test/figures"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestOrderRestartsTheControllerManagerAtMostOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		gateOn bool
		want   []string
	}{
		{"gate on: maxUnavailable first", true, []string{report.StrategyRollingUpdateMaxUnavailable, report.StrategyOnDeleteLease, report.StrategyOnDeleteDirect, report.StrategyOnDeleteConcurrent, report.StrategyRollingUpdate}},
		{"gate off: plain RollingUpdate first", false, []string{report.StrategyRollingUpdate, report.StrategyOnDeleteLease, report.StrategyOnDeleteDirect, report.StrategyOnDeleteConcurrent, report.StrategyRollingUpdateMaxUnavailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := order(report.Strategies, tc.gateOn)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("order = %v, want %v", got, tc.want)
			}
			switches, gate := 0, tc.gateOn
			for _, id := range got {
				if g := strategies[id].kcmGate(); g != nil && *g != gate {
					switches++
					gate = *g
				}
			}
			if switches > 1 {
				t.Errorf("%d controller-manager restarts in one scenario, want at most 1", switches)
			}
		})
	}
}

func TestLeaderAt(t *testing.T) {
	epochs := []workload.LeaderEpoch{
		{At: at(0), Term: 2, Leader: "etcd-1"},
		{At: at(1000), Term: 3, Leader: "etcd-0"},
		{At: at(2000), Term: 4, LeaderID: "abc"},
	}
	for _, tc := range []struct {
		name string
		t    time.Time
		want string
	}{
		{"before any epoch", at(-10), ""},
		{"within the first epoch", at(900), "etcd-1"},
		{"a handover seen just before the deletion is its own doing", at(1020), "etcd-1"},
		{"well after the handover", at(1500), "etcd-0"},
		{"leader known only by id", at(3000), "abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := leaderAt(epochs, tc.t); got != tc.want {
				t.Errorf("leaderAt = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLeaderDeletedWhileFollowersRemained(t *testing.T) {
	members := []string{"etcd-0", "etcd-1", "etcd-2"}
	allServing := []workload.ParticipationSample{
		{At: at(-1000), Member: "etcd-0", Participating: true},
		{At: at(-1000), Member: "etcd-1", Participating: true},
		{At: at(-1000), Member: "etcd-2", Participating: true},
	}
	del := func(pod, leader string, ms int) report.DeletionRecord {
		return report.DeletionRecord{Pod: pod, Leader: leader, Participating: true, AtSeconds: float64(ms) / 1000}
	}
	times := func(ds []report.DeletionRecord) []time.Time {
		out := make([]time.Time, len(ds))
		for i, d := range ds {
			out[i] = at(int(d.AtSeconds * 1000))
		}
		return out
	}
	allOutdated := func(int) bool { return true }
	for _, tc := range []struct {
		name          string
		deletions     []report.DeletionRecord
		participation []workload.ParticipationSample
		want          int
	}{
		{"followers first, leader last", []report.DeletionRecord{del("etcd-1", "etcd-0", 0), del("etcd-2", "etcd-0", 3000), del("etcd-0", "etcd-0", 6000)}, allServing, 0},
		{"leader first while followers served", []report.DeletionRecord{del("etcd-0", "etcd-0", 0), del("etcd-1", "etcd-2", 3000), del("etcd-2", "etcd-2", 6000)}, allServing, 1},
		{"leader first but the only outdated follower was down", []report.DeletionRecord{del("etcd-0", "etcd-0", 0), del("etcd-1", "etcd-0", 3000)},
			append(append([]workload.ParticipationSample{}, allServing...), workload.ParticipationSample{At: at(-500), Member: "etcd-1"}, workload.ParticipationSample{At: at(-500), Member: "etcd-2"}), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := leaderDeletedWhileFollowersRemained(tc.deletions, times(tc.deletions), members, allOutdated, tc.participation)
			if got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestTimelineSpans(t *testing.T) {
	bumped := at(0)
	rep := workload.Report{
		Started: at(-1000), Stopped: at(9000),
		Participation: []workload.ParticipationSample{
			{At: at(-1000), Member: "etcd-0", Participating: false},
			{At: at(-1000), Member: "etcd-1", Participating: true},
			{At: at(2000), Member: "etcd-1", Participating: false},
			{At: at(4000), Member: "etcd-0", Participating: true},
		},
	}
	got := timeline("x", &report.Run{Completed: true, Rollout: figures.Rollout{RolloutSeconds: 8}}, []string{"etcd-0", "etcd-1"}, bumped, rep, nil)
	want := []report.Span{{Member: "etcd-1", From: -1, To: 2}, {Member: "etcd-0", From: 4, To: 9}}
	if !reflect.DeepEqual(got.Participation, want) {
		t.Errorf("spans = %+v, want %+v", got.Participation, want)
	}
}
