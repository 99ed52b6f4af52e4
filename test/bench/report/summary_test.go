package report

import (
	"strings"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/test/figures"
)

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a, b   figures.Stat
		want   float64
		wantOK bool
	}{
		{"plain", figures.Stat{N: 1, Median: 1}, figures.Stat{N: 1, Median: 4}, 0.25, true},
		{"baseline zero", figures.Stat{N: 1, Median: 3}, figures.Stat{N: 1, Median: 0}, 0, false},
		{"no baseline runs", figures.Stat{N: 1, Median: 3}, figures.Stat{}, 0, false},
		{"no runs", figures.Stat{}, figures.Stat{N: 1, Median: 3}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Ratio(tc.a, tc.b)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("Ratio = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func intp(n int) *int { return &n }

func sampleRuns() []Run {
	return []Run{
		{Scenario: "3-one-dead", Strategy: StrategyOnDeleteDirect, Rep: 1, Completed: true, Deletions: 3, ParticipatingDeletions: 2, Rollout: figures.Rollout{RolloutSeconds: 10, QuorumLossMs: 0, LongestWriteGapMs: 200, LeaderStepGapMs: 200, IdleJitterMs: 50, FailedWrites: 2}},
		{Scenario: "3-one-dead", Strategy: StrategyRollingUpdate, Rep: 1, Completed: true, Deletions: 3, ParticipatingDeletions: 2, Rollout: figures.Rollout{RolloutSeconds: 8, QuorumLossMs: 3000, LongestWriteGapMs: 1600, FailedWrites: 20}},
		{Scenario: "3-one-dead", Strategy: StrategyRollingUpdate, Rep: 2, Completed: true, Deletions: 3, ParticipatingDeletions: 2, Rollout: figures.Rollout{RolloutSeconds: 12, QuorumLossMs: 1000, LongestWriteGapMs: 1400, FailedWrites: 30}},
		{Scenario: "3-one-dead", Strategy: StrategyRollingUpdateMaxUnavailable, Rep: 1, Completed: false, Note: "no progress for 30s", Rollout: figures.Rollout{RolloutSeconds: 31}},
		{Scenario: "3-healthy", Strategy: StrategyRollingUpdate, Rep: 1, Completed: true, Deletions: 3, ParticipatingDeletions: 3, Rollout: figures.Rollout{RolloutSeconds: 9}},
		{Scenario: ScenarioStaleRole, Strategy: StrategyOnDeleteLease, Rep: 1, Completed: true, Deletions: 3, LeaderDeletedWhileFollowersRemained: intp(1)},
		{Scenario: ScenarioStaleRole, Strategy: StrategyOnDeleteDirect, Rep: 1, Completed: true, Deletions: 3, LeaderDeletedWhileFollowersRemained: intp(0)},
	}
}

func TestTable(t *testing.T) {
	table := Table(sampleRuns())
	lines := strings.Split(strings.TrimSpace(table), "\n")
	rows := lines[2:]
	// Scenarios in the order, strategies in theirs, whatever order the runs came in.
	wantOrder := []string{
		"| 3-healthy | `rolling-update` |",
		"| 3-one-dead | `rolling-update` |",
		"| 3-one-dead | `rolling-update-maxunavailable` |",
		"| 3-one-dead | `ondelete-direct` |",
		"| stale-role | `ondelete-lease` |",
		"| stale-role | `ondelete-direct` |",
	}
	if len(rows) != len(wantOrder) {
		t.Fatalf("got %d rows, want %d:\n%s", len(rows), len(wantOrder), table)
	}
	for i, prefix := range wantOrder {
		if !strings.HasPrefix(rows[i], prefix) {
			t.Errorf("row %d = %q, want it to start with %q", i, rows[i], prefix)
		}
	}
	for _, tc := range []struct {
		name, row, want string
	}{
		{"median with spread over two reps", rows[1], "| 10.0 (8.0–12.0) | 1.00× | 0 | 2000 (1000–3000) |"},
		{"incomplete strategy shows no figures", rows[2], "| 0/1 | — | — | — |"},
		{"ratio to rolling-update's median", rows[3], "| 1/1 | 10.0 | 1.00× | 0 | 0 |"},
		{"leader step within 3× idle jitter", rows[3], "| 0/1 | 200 |"},
		{"deletions with participating count", rows[3], "| 3 (2) |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.row, tc.want) {
				t.Errorf("row %q does not contain %q", tc.row, tc.want)
			}
		})
	}
}

func TestMarkdownListsIncompleteRunsAndStaleRoles(t *testing.T) {
	md := Markdown(Results{Date: "2026-11-22T09:00:00Z", Machine: Machine{CPUs: 2, MemoryGiB: 23.4, Kernel: "6.1", GoVersion: "go1.26"}, Reps: 2, Runs: sampleRuns()})
	for _, want := range []string{
		"2 CPUs, 23.4 GiB memory, Linux 6.1",
		"- 3-one-dead / rolling-update-maxunavailable rep 1 after 31 s: no progress for 30s",
		"| stale-role | `ondelete-lease` | 1 | 1 | 1 | 3 |",
		"| stale-role | `ondelete-direct` | 1 | 0 | 0 | 3 |",
		"| 3-one-dead | `ondelete-direct` | 1 | true | 10.0 | 0 | 0 | 0 | 0 | 0 | 200 | 50 | no | 200 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
