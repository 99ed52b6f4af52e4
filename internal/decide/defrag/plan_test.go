package defrag

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
)

func healthy(name string, leader bool, db, inUse int64) Member {
	return Member{Name: name, Ready: true, Reachable: true, Leader: leader, DBSize: db, DBSizeInUse: inUse}
}

func three() []Member {
	return []Member{healthy("etcd-0", false, 100, 90), healthy("etcd-1", true, 100, 50), healthy("etcd-2", false, 100, 10)}
}

func TestPlan(t *testing.T) {
	for _, tt := range []struct {
		name       string
		o          Observed
		wantAction Action
		wantRule   RuleID
		wantMember string
	}{
		{name: "not due", o: Observed{Desired: 3, Members: three()}, wantAction: ActionNone, wantRule: RuleNotDue},
		{
			name:       "follower with the most to reclaim first",
			o:          Observed{Due: true, Desired: 3, Members: three()},
			wantAction: ActionDefragment, wantRule: RuleFollower, wantMember: "etcd-2",
		},
		{
			name:       "then the other follower",
			o:          Observed{Due: true, Desired: 3, Members: three(), Handled: map[string]bool{"etcd-2": true}},
			wantAction: ActionDefragment, wantRule: RuleFollower, wantMember: "etcd-0",
		},
		{
			name:       "leader last",
			o:          Observed{Due: true, Desired: 3, Members: three(), Handled: map[string]bool{"etcd-0": true, "etcd-2": true}},
			wantAction: ActionDefragment, wantRule: RuleLeader, wantMember: "etcd-1",
		},
		{
			name:       "done",
			o:          Observed{Due: true, Desired: 3, Members: three(), Handled: map[string]bool{"etcd-0": true, "etcd-1": true, "etcd-2": true}},
			wantAction: ActionDone, wantRule: RuleDone,
		},
		{
			name:       "rollout in flight",
			o:          Observed{Due: true, Desired: 3, Members: three(), RolloutInFlight: true},
			wantAction: ActionWait, wantRule: RuleRolloutInFlight,
		},
		{
			name:       "scale in flight",
			o:          Observed{Due: true, Desired: 3, Members: three(), ScaleInFlight: true},
			wantAction: ActionWait, wantRule: RuleScaleInFlight,
		},
		{
			name:       "recovery in flight",
			o:          Observed{Due: true, Desired: 3, Members: three(), Operations: operation.Set{{Kind: operation.KindRecovery}}},
			wantAction: ActionWait, wantRule: operation.WaitRule(Planner, operation.KindRecovery),
		},
		{
			name:       "its own operation is not waited on",
			o:          Observed{Due: true, Desired: 3, Members: three(), Operations: operation.Set{{Kind: operation.KindDefragmentation}}},
			wantAction: ActionDefragment, wantRule: RuleFollower, wantMember: "etcd-2",
		},
		{
			name:       "backup not ready: the run waits",
			o:          Observed{Due: true, Desired: 3, Members: three(), Backup: backupgate.Gate{Holds: true, Reason: "UploadFailed"}},
			wantAction: ActionWait, wantRule: RuleBackupNotReady,
		},
		{
			name: "backup not ready mid-run: the leader waits too",
			o: Observed{Due: true, Desired: 3, Members: three(), Handled: map[string]bool{"etcd-0": true, "etcd-2": true},
				Backup: backupgate.Gate{Holds: true}},
			wantAction: ActionWait, wantRule: RuleBackupNotReady,
		},
		{
			name:       "backup not ready but not due: nothing to say",
			o:          Observed{Desired: 3, Members: three(), Backup: backupgate.Gate{Holds: true}},
			wantAction: ActionNone, wantRule: RuleNotDue,
		},
		{
			name:       "a member pod missing",
			o:          Observed{Due: true, Desired: 3, Members: three()[:2]},
			wantAction: ActionWait, wantRule: RuleMemberNotInPlace,
		},
		{
			name: "a member not ready",
			o: Observed{Due: true, Desired: 3, Members: func() []Member {
				m := three()
				m[0].Ready = false
				return m
			}()},
			wantAction: ActionWait, wantRule: RuleMemberUnhealthy,
		},
		{
			name: "a member unreachable",
			o: Observed{Due: true, Desired: 3, Members: func() []Member {
				m := three()
				m[2].Reachable = false
				return m
			}()},
			wantAction: ActionWait, wantRule: RuleMemberUnhealthy,
		},
		{
			name: "no leader",
			o: Observed{Due: true, Desired: 3, Members: func() []Member {
				m := three()
				m[1].Leader = false
				return m
			}()},
			wantAction: ActionWait, wantRule: RuleNoLeader,
		},
		{
			name: "two leaders",
			o: Observed{Due: true, Desired: 3, Members: func() []Member {
				m := three()
				m[0].Leader = true
				return m
			}()},
			wantAction: ActionWait, wantRule: RuleInvalidObserved,
		},
		{
			name:       "single member has no headroom",
			o:          Observed{Due: true, Desired: 1, Members: []Member{healthy("etcd-0", true, 100, 10)}},
			wantAction: ActionSkip, wantRule: RuleNoHeadroom,
		},
		{
			name: "a learner does not add headroom",
			o: Observed{Due: true, Desired: 2, Members: []Member{
				healthy("etcd-0", true, 100, 10), {Name: "etcd-1", Ready: true, Reachable: true, Learner: true},
			}},
			wantAction: ActionSkip, wantRule: RuleNoHeadroom,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Plan(tt.o)
			if d.Action != tt.wantAction || d.Rule != tt.wantRule || d.Member != tt.wantMember {
				t.Errorf("Plan = %s %s %q (%s), want %s %s %q", d.Action, d.Rule, d.Member, d.Reason, tt.wantAction, tt.wantRule, tt.wantMember)
			}
			if d.Reason == "" {
				t.Error("decision without a reason")
			}
		})
	}
}

func randomObserved(r *rand.Rand) Observed {
	o := Observed{
		Due:             r.IntN(8) != 0,
		Desired:         r.IntN(6),
		RolloutInFlight: r.IntN(6) == 0,
		ScaleInFlight:   r.IntN(6) == 0,
		Handled:         map[string]bool{},
	}
	if r.IntN(6) == 0 {
		kinds := []operation.Kind{operation.KindScale, operation.KindRecovery, operation.KindDefragmentation, operation.KindStrategyHold}
		o.Operations = operation.Set{{Kind: kinds[r.IntN(len(kinds))]}}
	}
	n := o.Desired
	if r.IntN(6) == 0 {
		n = r.IntN(6)
	}
	leader := r.IntN(n + 1)
	for i := 0; i < n; i++ {
		m := Member{
			Name:      fmt.Sprintf("etcd-%d", i),
			Ready:     r.IntN(5) != 0,
			Reachable: r.IntN(5) != 0,
			Leader:    i == leader || r.IntN(30) == 0,
			Learner:   r.IntN(10) == 0,
			DBSize:    r.Int64N(1000),
		}
		m.DBSizeInUse = r.Int64N(1100)
		o.Members = append(o.Members, m)
		if r.IntN(3) == 0 {
			o.Handled[m.Name] = true
		}
	}
	if r.IntN(4) == 0 {
		o.Backup = backupgate.Gate{Holds: true, Reason: "UploadFailed"}
	}
	return o
}

// The safety properties hold for any observation.
func TestPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		o := randomObserved(r)
		d := Plan(o)
		if d.Reason == "" || d.Rule == "" {
			t.Fatalf("decision without rule or reason for %+v", o)
		}
		if d != Plan(o) {
			t.Fatalf("Plan is not deterministic for %+v", o)
		}
		if d.Action != ActionDefragment {
			if d.Member != "" {
				t.Fatalf("%s names member %s", d.Action, d.Member)
			}
			continue
		}
		if !o.Due || o.RolloutInFlight || o.ScaleInFlight || len(o.Operations.Except(operation.KindDefragmentation)) > 0 || o.Backup.Holds {
			t.Fatalf("defragments %s outside a quiet due run: %+v", d.Member, o)
		}
		if o.Handled[d.Member] {
			t.Fatalf("defragments %s twice in a run", d.Member)
		}
		voters, healthyVoters, leaders := 0, 0, 0
		var target *Member
		for i, m := range o.Members {
			if m.Name == d.Member {
				target = &o.Members[i]
			}
			if !m.Ready || !m.Reachable {
				t.Fatalf("defragments %s while %s is unhealthy", d.Member, m.Name)
			}
			if m.Leader {
				leaders++
			}
			if !m.Learner {
				voters++
				healthyVoters++
			}
		}
		if target == nil {
			t.Fatalf("defragments %s, which was not observed", d.Member)
		}
		if leaders != 1 {
			t.Fatalf("defragments with %d leaders observed", leaders)
		}
		if healthyVoters-1 < quorum.Of(voters) {
			t.Fatalf("defragments %s with %d healthy of %d voters (quorum %d): no headroom", d.Member, healthyVoters, voters, quorum.Of(voters))
		}
		if target.Leader {
			for _, m := range o.Members {
				if !m.Leader && !o.Handled[m.Name] {
					t.Fatalf("defragments leader %s before follower %s", d.Member, m.Name)
				}
			}
		}
	}
}
