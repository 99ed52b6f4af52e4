package membership

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

// voter builds a healthy started voting member of ordinal i.
func voter(i int) Member {
	return Member{ID: uint64(100 + i), Name: name(i), Ordinal: i, Started: true, Healthy: true}
}

func name(i int) string { return "etcd-" + string(rune('0'+i)) }

func with(m Member, f func(*Member)) Member { f(&m); return m }

func leader(m Member) Member  { return with(m, func(m *Member) { m.Leader = true }) }
func sick(m Member) Member    { return with(m, func(m *Member) { m.Healthy = false }) }
func lost(m Member) Member    { return with(m, func(m *Member) { m.DataLost = true; m.Healthy = false }) }
func learner(m Member) Member { return with(m, func(m *Member) { m.Learner = true }) }
func unstarted(m Member) Member {
	return with(m, func(m *Member) { m.Started = false; m.Healthy = false })
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        Observed
		action   Action
		rule     RuleID
		member   string
		ordinal  int
		replicas int
	}{
		{name: "members unknown, not bootstrapped: size the StatefulSet",
			o:      Observed{Desired: 3, StatefulSetReplicas: 1},
			action: ActionSetReplicas, rule: RuleBootstrapReplicas, replicas: 3},
		{name: "members unknown after bootstrap: wait",
			o:      Observed{Desired: 3, StatefulSetReplicas: 1, Bootstrapped: true},
			action: ActionWait, rule: RuleMembersUnknown},
		{name: "hibernate: replicas 0 keeps the membership",
			o:      Observed{Desired: 0, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2)}},
			action: ActionSetReplicas, rule: RuleHibernate, replicas: 0},
		{name: "wake from hibernation",
			o:      Observed{Desired: 3, StatefulSetReplicas: 0, Bootstrapped: true},
			action: ActionSetReplicas, rule: RuleWake, replicas: 3},
		{name: "settled",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2)}},
			action: ActionDone, rule: RuleDone},
		{name: "1→3: add learner for ordinal 1 first",
			o:      Observed{Desired: 3, StatefulSetReplicas: 1, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0))}},
			action: ActionAddLearner, rule: RuleAddLearner, ordinal: 1},
		{name: "learner added: create its pod",
			o:      Observed{Desired: 3, StatefulSetReplicas: 1, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), unstarted(learner(voter(1)))}},
			action: ActionSetReplicas, rule: RuleLearnerPod, replicas: 2},
		{name: "learner pod exists: wait for it to start, add nothing",
			o:      Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), unstarted(learner(voter(1)))}},
			action: ActionWait, rule: RuleLearnerStarting},
		{name: "learner started: promote",
			o:      Observed{Desired: 3, StatefulSetReplicas: 2, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), learner(voter(1))}},
			action: ActionPromote, rule: RulePromote, member: "etcd-1"},
		{name: "promotion would leave no healthy quorum: wait",
			o:      Observed{Desired: 5, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), sick(voter(2)), sick(learner(voter(3)))}},
			action: ActionWait, rule: RulePromoteUnsafe},
		{name: "3→5 with one member dead: still add (2/3 healthy)",
			o:      Observed{Desired: 5, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), sick(voter(2))}},
			action: ActionAddLearner, rule: RuleAddLearner, ordinal: 3},
		{name: "quorum lost: add nothing",
			o:      Observed{Desired: 5, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{voter(0), sick(voter(1)), sick(voter(2))}},
			action: ActionWait, rule: RuleAddUnsafe},
		{name: "5→3: remove the highest ordinal first",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2), voter(3), voter(4)}},
			action: ActionRemove, rule: RuleRemove, member: "etcd-4"},
		{name: "5→3: leader among those removed is moved off first, to a kept healthy voter",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{sick(voter(0)), voter(1), voter(2), voter(3), leader(voter(4))}},
			action: ActionMoveLeader, rule: RuleMoveLeader, member: "etcd-4"},
		{name: "5→3: members removed one at a time before any pod goes",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2), voter(3)}},
			action: ActionRemove, rule: RuleRemove, member: "etcd-3"},
		{name: "members removed: shrink the StatefulSet",
			o:      Observed{Desired: 3, StatefulSetReplicas: 5, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2)}},
			action: ActionSetReplicas, rule: RuleShrink, replicas: 3},
		{name: "3→1 with one member already dead: removing a healthy one would lose quorum",
			o:      Observed{Desired: 1, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), sick(voter(1)), voter(2)}},
			action: ActionWait, rule: RuleRemoveUnsafe},
		{name: "data lost: remove it while the others keep quorum",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), lost(voter(2))}},
			action: ActionRemove, rule: RuleReplaceDataLost, member: "etcd-2"},
		{name: "data lost with another member down: wait",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), sick(voter(1)), lost(voter(2))}},
			action: ActionWait, rule: RuleReplaceUnsafe},
		{name: "data-lost member removed: add it again as a learner (its pod exists)",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1)}},
			action: ActionAddLearner, rule: RuleAddLearner, ordinal: 2},
		{name: "learner left behind by a reverted scale-out is removed",
			o:      Observed{Desired: 3, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, Members: []Member{leader(voter(0)), voter(1), voter(2), unstarted(learner(voter(3)))}},
			action: ActionRemove, rule: RuleLearnerUnwanted, member: "etcd-3"},
		{name: "foreign member is removed when safe, after its grace period",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, SuperfluousGrace: time.Minute, Members: []Member{leader(voter(0)), voter(1), voter(2), {ID: 9, Name: "", Ordinal: -1, Started: true, SeenFor: 2 * time.Minute}}},
			action: ActionRemove, rule: RuleRemove},
		{name: "foreign member within its grace period is left alone",
			o:      Observed{Desired: 3, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, SuperfluousGrace: time.Minute, Members: []Member{leader(voter(0)), voter(1), voter(2), {ID: 9, Name: "", Ordinal: -1, Started: true, SeenFor: 10 * time.Second}}},
			action: ActionWait, rule: RuleSuperfluousGrace},
		{name: "resize waits for a rollout",
			o:      Observed{Desired: 5, StatefulSetReplicas: 3, Bootstrapped: true, MembersKnown: true, RolloutInFlight: true, Members: []Member{leader(voter(0)), voter(1), voter(2)}},
			action: ActionWait, rule: RuleRolloutInFlight},
		{name: "a learner that has not started yields to a rollout (its pod may be the broken one)",
			o:      Observed{Desired: 5, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, RolloutInFlight: true, Members: []Member{leader(voter(0)), voter(1), voter(2), unstarted(learner(voter(3)))}},
			action: ActionWait, rule: RuleRolloutInFlight},
		{name: "a learner is finished even during a rollout",
			o:      Observed{Desired: 5, StatefulSetReplicas: 4, Bootstrapped: true, MembersKnown: true, RolloutInFlight: true, Members: []Member{leader(voter(0)), voter(1), voter(2), learner(voter(3))}},
			action: ActionPromote, rule: RulePromote, member: "etcd-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.o)
			if d.Action != tc.action || d.Rule != tc.rule {
				t.Fatalf("got %s [%s] %q, want %s [%s]", d.Action, d.Rule, d.Reason, tc.action, tc.rule)
			}
			if tc.member != "" && (d.Member == nil || d.Member.Name != tc.member) {
				t.Errorf("member = %+v, want %s", d.Member, tc.member)
			}
			if tc.action == ActionAddLearner && d.Ordinal != tc.ordinal {
				t.Errorf("ordinal = %d, want %d", d.Ordinal, tc.ordinal)
			}
			if tc.action == ActionSetReplicas && d.Replicas != tc.replicas {
				t.Errorf("replicas = %d, want %d", d.Replicas, tc.replicas)
			}
			if !strings.Contains(d.Reason, "voters") && tc.o.MembersKnown && tc.o.Desired > 0 {
				t.Errorf("reason %q carries no numbers", d.Reason)
			}
		})
	}
}

// TestPlanProperties checks the safety invariants on random observations.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for n := 0; n < 20000; n++ {
		o := randomObserved(rng)
		d := Plan(o)
		v := newView(o)
		learners := 0
		for _, m := range o.Members {
			if m.Learner {
				learners++
			}
		}
		switch d.Action {
		case ActionAddLearner:
			if learners > 0 {
				t.Fatalf("adds while a learner exists: %+v → %+v", o, d)
			}
			if v.healthy < Quorum(v.voters) {
				t.Fatalf("adds without a healthy quorum: %+v → %+v", o, d)
			}
		case ActionRemove:
			if d.Member.Ordinal < 0 && !d.Member.Learner && d.Member.SeenFor < o.SuperfluousGrace {
				t.Fatalf("removes a member no pod stands for within its grace period: %+v → %+v", o, d)
			}
			if !d.Member.Learner {
				healthyAfter := v.healthy
				if d.Member.Healthy {
					healthyAfter--
				}
				if healthyAfter < Quorum(v.voters-1) {
					t.Fatalf("removes a voter leaving %d healthy of %d: %+v → %+v", healthyAfter, v.voters-1, o, d)
				}
				if d.Member.Leader {
					t.Fatalf("removes the leader without moving leadership first: %+v → %+v", o, d)
				}
			}
		case ActionMoveLeader:
			if d.Target.Learner || !d.Target.Healthy {
				t.Fatalf("moves leadership to a learner or an unhealthy member: %+v → %+v", o, d)
			}
		case ActionPromote:
			if !d.Member.Learner || !d.Member.Started {
				t.Fatalf("promotes a non-learner or an unstarted learner: %+v → %+v", o, d)
			}
		case ActionSetReplicas:
			// Never delete the pod of a member: the StatefulSet never shrinks below a member's ordinal.
			if d.Replicas < o.StatefulSetReplicas && d.Replicas <= v.highest {
				t.Fatalf("shrinks the StatefulSet to %d below member ordinal %d: %+v", d.Replicas, v.highest, o)
			}
		}
		if !o.MembersKnown && o.Bootstrapped && d.Action != ActionWait && d.Rule != RuleWake && d.Rule != RuleHibernate && d.Action != ActionDone {
			t.Fatalf("acts without a member list on a bootstrapped cluster: %+v → %+v", o, d)
		}
	}
}

func randomObserved(rng *rand.Rand) Observed {
	o := Observed{
		Desired:             1 + 2*rng.Intn(4),
		StatefulSetReplicas: rng.Intn(8),
		Bootstrapped:        rng.Intn(5) > 0,
		MembersKnown:        rng.Intn(6) > 0,
		RolloutInFlight:     rng.Intn(4) == 0,
	}
	learnerAdded := false
	for i := 0; i < 8; i++ {
		if rng.Intn(3) == 0 {
			continue
		}
		m := voter(i)
		m.Healthy = rng.Intn(4) > 0
		m.DataLost = rng.Intn(8) == 0
		if !learnerAdded && rng.Intn(5) == 0 {
			m.Learner, learnerAdded = true, true
			m.Started = rng.Intn(2) == 0
		}
		o.Members = append(o.Members, m)
	}
	if rng.Intn(10) == 0 {
		o.Members = append(o.Members, Member{ID: 999, Ordinal: -1, Started: true, Healthy: rng.Intn(2) == 0, SeenFor: time.Duration(rng.Intn(120)) * time.Second})
		o.SuperfluousGrace = time.Minute
	}
	var leaders []int
	for i, m := range o.Members {
		if !m.Learner && m.Healthy {
			leaders = append(leaders, i)
		}
	}
	if len(leaders) > 0 && rng.Intn(5) > 0 {
		o.Members[leaders[rng.Intn(len(leaders))]].Leader = true
	}
	if !o.MembersKnown {
		o.Members = nil
	}
	return o
}
