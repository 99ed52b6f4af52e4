package memberhealth

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
)

const grace = 5 * time.Minute

// healthy is a Ready voter the leader hears.
func healthy(name string) Member {
	return Member{Name: name, Pod: true, PodAge: time.Hour, Voter: true, Heard: true}
}

// stuckFor is a voter NotReady for d whose pod is an hour old; heard says whether the leader
// hears it.
func stuckFor(name string, d time.Duration, heard bool) Member {
	return Member{Name: name, NotReady: true, Reason: "ContainerNotReady", NotReadyFor: d, Pod: true, PodAge: time.Hour, Voter: true, Heard: heard}
}

func obs(members ...Member) Observed {
	voters := 0
	for _, m := range members {
		if m.Voter {
			voters++
		}
	}
	return Observed{Members: members, NotReadyGrace: grace, MembersKnown: true, Voters: voters, HeardKnown: true}
}

func TestPlan(t *testing.T) {
	young := stuckFor("etcd-main-2", time.Hour, false)
	young.PodAge = time.Minute
	learner := stuckFor("etcd-main-2", time.Hour, false)
	learner.Voter = false
	for _, tc := range []struct {
		name     string
		o        Observed
		want     RuleID
		pod      string
		inReason []string
	}{
		{name: "all ready", o: obs(healthy("etcd-main-0"), healthy("etcd-main-1"), healthy("etcd-main-2")), want: RuleDone},
		{name: "NotReady within the grace", o: obs(healthy("etcd-main-0"), healthy("etcd-main-1"), stuckFor("etcd-main-2", grace, false)),
			want: RuleDone, inReason: []string{"1 of 3 members NotReady: etcd-main-2", "5m0s"}},
		{name: "NotReady past the grace, pod just recreated", o: obs(healthy("etcd-main-0"), healthy("etcd-main-1"), young), want: RuleDone},
		{name: "NotReady past the grace, not heard", o: obs(healthy("etcd-main-0"), healthy("etcd-main-1"), stuckFor("etcd-main-2", grace+time.Second, false)),
			want: RuleRestartNonVoting, pod: "etcd-main-2", inReason: []string{"hears 2 of 3 voters (a quorum is 2)", "NotReady for 5m1s"}},
		{name: "learner stuck", o: obs(healthy("etcd-main-0"), healthy("etcd-main-1"), learner), want: RuleRestartNonVoting, pod: "etcd-main-2"},
		{name: "heard voter stuck in 3: two others remain heard", o: obs(healthy("etcd-main-0"), healthy("etcd-main-1"), stuckFor("etcd-main-2", time.Hour, true)),
			want: RuleRestartHeardVoter, pod: "etcd-main-2", inReason: []string{"still hears 2 of 3 voters (a quorum is 2)"}},
		{name: "heard voter stuck, another voter unheard: deleting would break quorum",
			o:    obs(healthy("etcd-main-0"), func() Member { m := healthy("etcd-main-1"); m.Heard = false; return m }(), stuckFor("etcd-main-2", time.Hour, true)),
			want: RuleRestartUnsafe, inReason: []string{"without one it would hear 1, fewer than a quorum of 2"}},
		{name: "two of three stuck: none deleted", o: obs(healthy("etcd-main-0"), stuckFor("etcd-main-1", time.Hour, false), stuckFor("etcd-main-2", time.Hour, false)),
			want: RuleMajorityNotReady, inReason: []string{"2 NotReady members of 3"}},
		{name: "quorum lost", o: obs(healthy("etcd-main-0"), func() Member { m := healthy("etcd-main-1"); m.Heard = false; return m }(),
			stuckFor("etcd-main-2", time.Hour, false)), want: RuleQuorumLost, inReason: []string{"hears 1 of 3 voters, a quorum is 2"}},
		{name: "rollout in flight", o: obs(healthy("etcd-main-0"), healthy("etcd-main-1"), stuckFor("etcd-main-2", time.Hour, false)).with(func(o *Observed) { o.RolloutInFlight = true }),
			want: operation.WaitRule(Planner, operation.KindRollout)},
		{name: "defragmentation in flight", o: obs(healthy("etcd-main-0"), healthy("etcd-main-1"), stuckFor("etcd-main-2", time.Hour, false)).with(func(o *Observed) {
			o.Operations = operation.Set{{Kind: operation.KindDefragmentation}}
		}), want: operation.WaitRule(Planner, operation.KindDefragmentation)},
		{name: "members unknown", o: obs(healthy("etcd-main-0"), healthy("etcd-main-1"), stuckFor("etcd-main-2", time.Hour, false)).with(func(o *Observed) { o.MembersKnown = false }),
			want: RuleMembersUnknown},
		{name: "heard unknown", o: obs(healthy("etcd-main-0"), healthy("etcd-main-1"), stuckFor("etcd-main-2", time.Hour, false)).with(func(o *Observed) { o.HeardKnown = false }),
			want: RuleHeardUnknown},
		{name: "single member stuck", o: obs(stuckFor("etcd-main-0", time.Hour, false)), want: RuleMajorityNotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.o)
			if d.Rule != tc.want || d.Pod != tc.pod {
				t.Fatalf("Plan = %s %q (%s), want %s %q", d.Rule, d.Pod, d.Reason, tc.want, tc.pod)
			}
			for _, s := range tc.inReason {
				if !strings.Contains(d.Reason, s) {
					t.Errorf("reason %q lacks %q", d.Reason, s)
				}
			}
		})
	}
}

func (o Observed) with(f func(*Observed)) Observed { f(&o); return o }

// Five members, two stuck (a minority of five is two): the one the leader does not hear goes
// first, whatever their ages; on the next pass (its pod terminating) nothing else is deleted.
func TestPlanFiveMembersTwoStuck(t *testing.T) {
	o := obs(healthy("etcd-main-0"), healthy("etcd-main-1"), healthy("etcd-main-2"),
		stuckFor("etcd-main-3", 2*time.Hour, true), stuckFor("etcd-main-4", time.Hour, false))
	d := Plan(o)
	if d.Action != ActionDeletePod || d.Pod != "etcd-main-4" || d.Rule != RuleRestartNonVoting {
		t.Fatalf("Plan = %s %q (%s), want etcd-main-4 deleted first", d.Rule, d.Pod, d.Reason)
	}
	o.RolloutInFlight = true
	if d := Plan(o); d.Action == ActionDeletePod {
		t.Fatalf("while a deleted pod terminates another was deleted: %s", d.Reason)
	}
}

// randomObserved is a plausible observation: up to 7 members, any mix of NotReady ages, pods,
// voters and heard members, sometimes an operation or a rollout in flight.
func randomObserved(r *rand.Rand) Observed {
	n := 1 + r.IntN(7)
	o := Observed{NotReadyGrace: time.Duration(1+r.IntN(10)) * time.Minute, MembersKnown: r.IntN(8) != 0, HeardKnown: r.IntN(8) != 0,
		RolloutInFlight: r.IntN(6) == 0}
	if r.IntN(6) == 0 {
		o.Operations = operation.Set{{Kind: []operation.Kind{operation.KindScale, operation.KindRecovery,
			operation.KindDefragmentation, operation.KindStrategyHold}[r.IntN(4)]}}
	}
	for i := 0; i < n; i++ {
		m := Member{Name: fmt.Sprintf("etcd-main-%d", i), NotReady: r.IntN(3) == 0, Pod: r.IntN(8) != 0,
			PodAge: time.Duration(r.IntN(20)) * time.Minute, Voter: r.IntN(6) != 0, Heard: r.IntN(4) != 0}
		if m.NotReady {
			m.NotReadyFor = time.Duration(r.IntN(20)) * time.Minute
		}
		if m.Voter {
			o.Voters++
		}
		o.Members = append(o.Members, m)
	}
	return o
}

// TestPlanProperties: over random observations, Plan deletes at most one pod, and only one of a
// member NotReady past the grace with a pod older than it; never during another operation or a
// rollout, never when NotReady members are no minority, never without the member list and the
// leader's view, never when the voters the leader hears would be fewer than a quorum after the
// deletion; a decision that deletes nothing deletes no pod; every reason carries numbers.
func TestPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 9))
	deleted := 0
	for i := 0; i < 20000; i++ {
		o := randomObserved(r)
		d := Plan(o)
		if d.Reason == "" || !strings.ContainsAny(d.Reason, "0123456789") {
			t.Fatalf("reason without numbers: %+v", d)
		}
		if d.Action != ActionDeletePod {
			if d.Pod != "" {
				t.Fatalf("%s names pod %q without deleting it", d.Rule, d.Pod)
			}
			continue
		}
		deleted++
		var victim *Member
		notReady, heard := 0, 0
		for j := range o.Members {
			m := &o.Members[j]
			if m.Name == d.Pod {
				victim = m
			}
			if m.NotReady {
				notReady++
			}
			if m.Voter && m.Heard {
				heard++
			}
		}
		switch {
		case victim == nil:
			t.Fatalf("deleted %q, no member of %+v", d.Pod, o)
		case !victim.NotReady || victim.NotReadyFor <= o.NotReadyGrace || !victim.Pod || victim.PodAge <= o.NotReadyGrace:
			t.Fatalf("deleted %+v, not NotReady past the grace %s with an older pod", victim, o.NotReadyGrace)
		case o.RolloutInFlight || len(o.Operations) > 0:
			t.Fatalf("deleted %s during another operation: %+v", d.Pod, o)
		case 2*notReady >= len(o.Members):
			t.Fatalf("deleted %s with %d of %d members NotReady", d.Pod, notReady, len(o.Members))
		case !o.MembersKnown || !o.HeardKnown:
			t.Fatalf("deleted %s without knowing the members (%t) or whom the leader hears (%t)", d.Pod, o.MembersKnown, o.HeardKnown)
		}
		after := heard
		if victim.Voter && victim.Heard {
			after--
		}
		if after < quorum.Of(o.Voters) {
			t.Fatalf("deleted %s leaving %d heard voters of %d (quorum %d): %s", d.Pod, after, o.Voters, quorum.Of(o.Voters), d.Reason)
		}
	}
	if deleted < 200 {
		t.Fatalf("only %d of 20000 random observations deleted a pod: the generator explores too little", deleted)
	}
}
