package backup

import (
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
)

func TestDecide(t *testing.T) {
	hourly, err := memberpod.ParseSchedule("0 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 12, 30, 0, 0, time.UTC)
	cfg := Settings{FullSchedule: hourly, DeltaPeriod: 10 * time.Second, GCPeriod: time.Minute}
	fresh := State{Leader: true, HaveFull: true, LastFull: now.Add(-10 * time.Minute), LastDelta: now.Add(-time.Second), LastGC: now}
	with := func(f func(*State)) State { s := fresh; f(&s); return s }
	tests := []struct {
		name   string
		state  State
		action Action
		rule   string
	}{
		{"follower does nothing", with(func(s *State) { s.Leader = false; s.HaveFull = false }), ActionNone, RuleNotLeader},
		{"backoff after a failure holds everything", with(func(s *State) { s.HaveFull = false; s.RetryAt = now.Add(time.Second) }), ActionNone, RuleRetryBackoff},
		{"no full snapshot yet", with(func(s *State) { s.HaveFull = false }), ActionFull, RuleFullNone},
		{"on demand", with(func(s *State) { s.OnDemand = "2026-11-22T12:29:00Z" }), ActionFull, RuleFullOnDemand},
		{"history compacted", with(func(s *State) { s.NeedFull = true }), ActionFull, RuleFullNoHistory},
		{"delta on demand", with(func(s *State) { s.OnDemandDelta = "EtcdOpsTask/d/1" }), ActionDelta, RuleDeltaOnDemand},
		{"delta on demand before a scheduled full", with(func(s *State) { s.OnDemandDelta = "r"; s.LastFull = now.Add(-31 * time.Minute) }), ActionDelta, RuleDeltaOnDemand},
		{"full on demand before delta on demand", with(func(s *State) { s.OnDemandDelta = "r"; s.OnDemand = "r" }), ActionFull, RuleFullOnDemand},
		{"a delta on demand needs a full snapshot first", with(func(s *State) { s.OnDemandDelta = "r"; s.HaveFull = false }), ActionFull, RuleFullNone},
		{"a delta on demand waits for history lost to a full snapshot", with(func(s *State) { s.OnDemandDelta = "r"; s.NeedFull = true }), ActionFull, RuleFullNoHistory},
		{"schedule reached", with(func(s *State) { s.LastFull = now.Add(-31 * time.Minute) }), ActionFull, RuleFullScheduled},
		{"delta period reached", with(func(s *State) { s.LastDelta = now.Add(-10 * time.Second) }), ActionDelta, RuleDeltaPeriod},
		{"full before delta", with(func(s *State) { s.LastDelta = now.Add(-time.Hour); s.LastFull = now.Add(-time.Hour) }), ActionFull, RuleFullScheduled},
		{"gc period reached", with(func(s *State) { s.LastGC = now.Add(-time.Minute) }), ActionGC, RuleGCPeriod},
		{"nothing due", fresh, ActionNone, RuleNothingDue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.state, cfg, now)
			if d.Action != tt.action || d.Rule != tt.rule || d.Reason == "" {
				t.Fatalf("Decide = %+v, want %s by %s", d, tt.action, tt.rule)
			}
		})
	}
	t.Run("deltas off still answer a request", func(t *testing.T) {
		off := cfg
		off.DeltaPeriod = 0
		if d := Decide(with(func(s *State) { s.OnDemandDelta = "r" }), off, now); d.Rule != RuleDeltaOnDemand {
			t.Fatalf("Decide with deltaSnapshotPeriod 0 and a request = %+v", d)
		}
	})
	t.Run("deltas off", func(t *testing.T) {
		off := cfg
		off.DeltaPeriod = 0
		if d := Decide(with(func(s *State) { s.LastDelta = time.Time{} }), off, now); d.Action == ActionDelta {
			t.Fatalf("Decide with deltaSnapshotPeriod 0 = %+v", d)
		}
	})
}
