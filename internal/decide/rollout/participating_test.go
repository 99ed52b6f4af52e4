package rollout

import (
	"encoding/json"
	"slices"
	"testing"
)

var (
	handoverOnly = Policy{Handover: true, HandoverAttempts: 3}
	catchUpOnly  = Policy{CatchUp: true, MaxAppliedIndexLag: 1000}
)

func concurrency(n int) Policy { return Policy{MaxConcurrent: n} }

// TestRuleQuorumHeadroom covers concurrency within the headroom: 5 voters take 2 at once, 7
// take 3, and what is already unavailable counts against it.
func TestRuleQuorumHeadroom(t *testing.T) {
	five := func(p ...*podBuilder) Observed { return withPolicy(observed(5, p...), concurrency(2)) }
	seven := func(p ...*podBuilder) Observed { return withPolicy(observed(7, p...), concurrency(3)) }
	runPlanCases(t, []planCase{
		{name: "5 voters: two followers at once", action: ActionDelete, pods: []string{"etcd-main-1", "etcd-main-2"}, rule: RuleParticipatingFollower,
			reasonHas: []string{"2 at once", "5 voters, quorum 3, headroom 2, 0 already unavailable"},
			in:        five(pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated(), pod("etcd-main-3").outdated(), pod("etcd-main-4").outdated())},
		{name: "7 voters: three at once", action: ActionDelete, pods: []string{"etcd-main-1", "etcd-main-2", "etcd-main-3"}, rule: RuleParticipatingFollower,
			in: seven(pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated(), pod("etcd-main-3").outdated(),
				pod("etcd-main-4").outdated(), pod("etcd-main-5").outdated(), pod("etcd-main-6").outdated())},
		{name: "configured above the headroom: capped", action: ActionDelete, pods: []string{"etcd-main-1", "etcd-main-2"}, rule: RuleParticipatingFollower,
			in: withPolicy(observed(5, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated(), pod("etcd-main-3").outdated(), pod("etcd-main-4").outdated()), concurrency(4))},
		{name: "3 voters: one at a time whatever is configured", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			in: withPolicy(observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated()), concurrency(3))},
		{name: "default: one at a time on 5 voters", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			in: observed(5, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated(), pod("etcd-main-3").outdated(), pod("etcd-main-4").outdated())},
		{name: "one dead voter updated and not back: one more only", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			in: five(pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated(), pod("etcd-main-3").outdated(), pod("etcd-main-4").dead())},
		{name: "partial batch: one rejoined, one still starting: one more", action: ActionDelete, pods: []string{"etcd-main-3"}, rule: RuleParticipatingFollower,
			in: five(pod("etcd-main-0").outdated().leader(), pod("etcd-main-1"), pod("etcd-main-2").transient(), pod("etcd-main-3").outdated(), pod("etcd-main-4").outdated())},
		{name: "batch still terminating: wait", action: ActionWait, rule: RulePodTerminating, waitsFor: []string{"etcd-main-1", "etcd-main-2"},
			in: five(pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated().terminating(), pod("etcd-main-2").outdated().terminating(), pod("etcd-main-3").outdated(), pod("etcd-main-4").outdated())},
		{name: "one missing, one stalled: wait", action: ActionWait, rule: RulePodMissing, waitsFor: []string{"etcd-main-1"},
			in: five(pod("etcd-main-0").outdated().leader(), pod("etcd-main-2").dead(), pod("etcd-main-3").outdated(), pod("etcd-main-4").outdated())},
		{name: "a learner counts against the headroom", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			in: five(pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated(), pod("etcd-main-3").outdated(), pod("etcd-main-4").learner())},
		{name: "two voters have no headroom", action: ActionWait, rule: RuleQuorumHeadroom, reasonHas: []string{"quorum 2 leaves a headroom of 0"},
			in: observed(2, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated())},
		{name: "the leader never joins a batch", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			in: five(pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2"), pod("etcd-main-3"), pod("etcd-main-4"))},
		{name: "a pod of unknown role goes alone", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingUnknownRole,
			in: five(pod("etcd-main-0"), pod("etcd-main-1").outdated().unknownRole(), pod("etcd-main-2").outdated().unknownRole(), pod("etcd-main-3"), pod("etcd-main-4"))},
	})
}

func TestRuleCatchUp(t *testing.T) {
	three := func(p ...*podBuilder) Observed { return withPolicy(observed(3, p...), catchUpOnly) }
	runPlanCases(t, []planCase{
		{name: "remaining voters within the bound", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			reasonHas: []string{"2 remaining voters within 1000 entries of leader etcd-main-0's applied index 50000 (largest lag 1000)"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(50000), pod("etcd-main-1").outdated().reported(49990), pod("etcd-main-2").reported(49000))},
		{name: "a remaining voter lags: wait and say by how much", action: ActionWait, rule: RuleCatchUp, waitsFor: []string{"etcd-main-2"},
			reasonHas: []string{"etcd-main-2 (1001 entries behind, applied 48999)", "catch up with leader etcd-main-0's applied index 50000 (bound 1000 entries) before deleting etcd-main-1"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(50000), pod("etcd-main-1").outdated().reported(50000), pod("etcd-main-2").reported(48999))},
		{name: "the lagging follower goes first", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleParticipatingFollower,
			in: three(pod("etcd-main-0").outdated().leader().reported(50000), pod("etcd-main-1").outdated().reported(50000), pod("etcd-main-2").outdated().reported(10))},
		{name: "no applied index from the leader: the highest reported is the reference", action: ActionWait, rule: RuleCatchUp, waitsFor: []string{"etcd-main-2"},
			reasonHas: []string{"etcd-main-2 (49990 entries behind, applied 10)", "applied index 50000 (etcd-main-1's, the highest reported: the leader did not report one)"},
			in:        three(pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated().reported(50000), pod("etcd-main-2").reported(10))},
		{name: "the leader did not report, the rest are close: deleted, reference said", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			reasonHas: []string{"2 remaining voters within 1000 entries of applied index 50000 (etcd-main-1's, the highest reported"},
			in:        withPolicy(observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated().reported(50000), pod("etcd-main-2").outdated().reported(49500)), catchUpOnly)},
		{name: "a remaining voter without an applied index is waited for", action: ActionWait, rule: RuleCatchUp, waitsFor: []string{"etcd-main-2"},
			reasonHas: []string{"etcd-main-2 (no applied index: it did not answer Status)"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(50000), pod("etcd-main-1").outdated().reported(50000), pod("etcd-main-2"))},
		{name: "no member reported: unchecked, said so", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			reasonHas: []string{"catch-up unchecked: no member reported an applied index"},
			in:        three(pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2"))},
		{name: "the gate holds the leader's handover too", action: ActionWait, rule: RuleCatchUp, waitsFor: []string{"etcd-main-2"},
			in: withPolicy(observed(3, pod("etcd-main-0").outdated().leader().reported(50000), pod("etcd-main-1").reported(50000), pod("etcd-main-2").reported(40000)),
				Policy{CatchUp: true, MaxAppliedIndexLag: 1000, Handover: true})},
	})
}

func TestHandover(t *testing.T) {
	three := func(p ...*podBuilder) Observed { return withPolicy(observed(3, p...), handoverOnly) }
	runPlanCases(t, []planCase{
		{name: "to the updated voter with the highest applied index", action: ActionHandover, pods: []string{"etcd-main-0"}, handoverTo: "etcd-main-2", rule: RuleHandover,
			reasonHas: []string{"from etcd-main-0 (outdated, applied index 900) to etcd-main-2 (updated, applied index 901, highest of 2 updated voters)", "attempt 1 of 3"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(900), pod("etcd-main-1").reported(899), pod("etcd-main-2").reported(901))},
		{name: "never to a learner", action: ActionHandover, pods: []string{"etcd-main-0"}, handoverTo: "etcd-main-3", rule: RuleHandover,
			in: withPolicy(observed(5, pod("etcd-main-0").outdated().leader().reported(900), pod("etcd-main-1").reported(800), pod("etcd-main-2").reported(901).learner(),
				pod("etcd-main-3").reported(850), pod("etcd-main-4").reported(700)), Policy{Handover: true, MaxConcurrent: 2})},
		{name: "a learner leaves no room one at a time", action: ActionWait, rule: RuleQuorumHeadroom, waitsFor: []string{"etcd-main-2"},
			in: withPolicy(observed(5, pod("etcd-main-0").outdated().leader().reported(900), pod("etcd-main-1").reported(800), pod("etcd-main-2").reported(901).learner(),
				pod("etcd-main-3").reported(850), pod("etcd-main-4").reported(700)), handoverOnly)},
		{name: "followers still go first", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			in: three(pod("etcd-main-0").outdated().leader().reported(900), pod("etcd-main-1").outdated().reported(899), pod("etcd-main-2").reported(901))},
		{name: "after the handover the old leader is a follower", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleParticipatingFollower,
			in: three(pod("etcd-main-0").outdated().reported(905), pod("etcd-main-1").reported(905), pod("etcd-main-2").leader().reported(905))},
		{name: "a retry goes to another member than the one that failed", action: ActionHandover, pods: []string{"etcd-main-0"}, handoverTo: "etcd-main-1", rule: RuleHandover,
			reasonHas: []string{"to etcd-main-1 (updated, applied index 899, highest of 2 updated voters; not etcd-main-2 again, a handover to it failed)", "attempt 2 of 3"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(900).handoverFailedTo("etcd-main-2"), pod("etcd-main-1").reported(899), pod("etcd-main-2").reported(901))},
		{name: "every member failed once: the best again", action: ActionHandover, pods: []string{"etcd-main-0"}, handoverTo: "etcd-main-2", rule: RuleHandover,
			reasonHas: []string{"a handover to each of them failed before, so the best again", "attempt 3 of 3"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(900).handoverFailedTo("etcd-main-2", "etcd-main-1"), pod("etcd-main-1").reported(899), pod("etcd-main-2").reported(901))},
		{name: "a failed member that is gone does not count", action: ActionHandover, pods: []string{"etcd-main-0"}, handoverTo: "etcd-main-2", rule: RuleHandover,
			reasonHas: []string{"highest of 2 updated voters)", "attempt 2 of 3"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(900).handoverFailedTo("etcd-main-7"), pod("etcd-main-1").reported(899), pod("etcd-main-2").reported(901))},
		{name: "an unheard target does not hold the retry", action: ActionHandover, pods: []string{"etcd-main-0"}, handoverTo: "etcd-main-1", rule: RuleHandover,
			reasonHas: []string{"highest of 1 updated voters; not etcd-main-2, which did not serve a read after a handover to it failed)", "attempt 2 of 3"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(900).handoverFailedTo("etcd-main-2"), pod("etcd-main-1").reported(899), pod("etcd-main-2").reported(901).unheard())},
		{name: "never to an unheard member, whatever its index", action: ActionHandover, pods: []string{"etcd-main-0"}, handoverTo: "etcd-main-1", rule: RuleHandover,
			in: three(pod("etcd-main-0").outdated().leader().reported(900), pod("etcd-main-1").reported(899), pod("etcd-main-2").reported(901).unheard())},
		{name: "only unheard members could take over: the leader is not deleted either", action: ActionWait, rule: RuleHandoverTargetUnheard, waitsFor: []string{"etcd-main-1", "etcd-main-2"},
			reasonHas: []string{"deleting etcd-main-0 would leave 0 of 3 voters known to be heard (quorum 2)"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(900), pod("etcd-main-1").reported(899).unheard(), pod("etcd-main-2").reported(901).unheard())},
		{name: "after the retry the old leader waits for the unheard target", action: ActionWait, rule: RuleHandoverTargetUnheard, waitsFor: []string{"etcd-main-2"},
			reasonHas: []string{"waiting for etcd-main-2: a handover to it failed", "deleting etcd-main-0 would leave 1 of 3 voters known to be heard (quorum 2)"},
			in:        three(pod("etcd-main-0").outdated().reported(905).handoverFailedTo("etcd-main-2"), pod("etcd-main-1").leader().reported(905), pod("etcd-main-2").reported(905).unheard())},
		{name: "five members: still one at a time, the unheard one counts out", action: ActionWait, rule: RuleHandoverTargetUnheard, waitsFor: []string{"etcd-main-1"},
			reasonHas: []string{"deleting etcd-main-0 would leave 3 of 5 voters known to be heard (quorum 3)"},
			in: withPolicy(observed(5, pod("etcd-main-0").outdated().reported(905).handoverFailedTo("etcd-main-1"), pod("etcd-main-1").reported(905).unheard(),
				pod("etcd-main-2").leader().reported(905), pod("etcd-main-3").reported(905), pod("etcd-main-4").reported(905)), handoverOnly)},
		{name: "heard again: the old leader goes as a follower", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleParticipatingFollower,
			in: three(pod("etcd-main-0").outdated().reported(905).handoverFailedTo("etcd-main-2"), pod("etcd-main-1").leader().reported(905), pod("etcd-main-2").reported(905))},
		{name: "attempts used up: delete, say so", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleLeaderHandoverFailed,
			reasonHas: []string{"after 3 failed handovers (at most 3)", "shutdown handover"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(900).handoverFailures(3), pod("etcd-main-1").reported(899), pod("etcd-main-2").reported(901))},
		{name: "no updated voter answered", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleLeaderNoTransferee,
			reasonHas: []string{"no updated, participating voter answered"},
			in:        three(pod("etcd-main-0").outdated().leader().reported(900), pod("etcd-main-1"), pod("etcd-main-2"))},
		{name: "the leader did not answer (roles from leases)", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleLeaderNoTransferee,
			reasonHas: []string{"did not answer over mTLS"},
			in:        three(pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").reported(1), pod("etcd-main-2").reported(1))},
		{name: "handover off: DEP-07's leader deletion", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleParticipatingLeader,
			in: observed(3, pod("etcd-main-0").outdated().leader().reported(900), pod("etcd-main-1").reported(899), pod("etcd-main-2").reported(901))},
	})
}

// TestConcurrentRolloutSequence replays a 5-member rollout with concurrency 2: two followers,
// a partial batch, the rest, the handover, the old leader.
func TestConcurrentRolloutSequence(t *testing.T) {
	policy := DefaultPolicy()
	policy.MaxConcurrent = 2
	five := func(p ...*podBuilder) Observed { return withPolicy(observed(5, p...), policy) }
	runPlanCases(t, []planCase{
		{name: "batch of two followers", action: ActionDelete, pods: []string{"etcd-main-1", "etcd-main-2"}, rule: RuleParticipatingFollower,
			in: five(pod("etcd-main-0").outdated().leader().reported(100), pod("etcd-main-1").outdated().reported(100), pod("etcd-main-2").outdated().reported(100),
				pod("etcd-main-3").outdated().reported(100), pod("etcd-main-4").outdated().reported(100))},
		{name: "etcd-main-1 back, etcd-main-2 stalls: one more", action: ActionDelete, pods: []string{"etcd-main-3"}, rule: RuleParticipatingFollower,
			in: five(pod("etcd-main-0").outdated().leader().reported(200), pod("etcd-main-1").reported(200), pod("etcd-main-2").dead(),
				pod("etcd-main-3").outdated().reported(200), pod("etcd-main-4").outdated().reported(200))},
		{name: "two unavailable: wait", action: ActionWait, rule: RuleUpdatedNotParticipating, waitsFor: []string{"etcd-main-2", "etcd-main-3"},
			in: five(pod("etcd-main-0").outdated().leader().reported(300), pod("etcd-main-1").reported(300), pod("etcd-main-2").dead(),
				pod("etcd-main-3").transient(), pod("etcd-main-4").outdated().reported(300))},
		{name: "both back: the last follower", action: ActionDelete, pods: []string{"etcd-main-4"}, rule: RuleParticipatingFollower,
			in: five(pod("etcd-main-0").outdated().leader().reported(400), pod("etcd-main-1").reported(400), pod("etcd-main-2").reported(399),
				pod("etcd-main-3").reported(400), pod("etcd-main-4").outdated().reported(400))},
		{name: "the leader: handover to the most caught-up", action: ActionHandover, pods: []string{"etcd-main-0"}, handoverTo: "etcd-main-3", rule: RuleHandover,
			in: five(pod("etcd-main-0").outdated().leader().reported(500), pod("etcd-main-1").reported(499), pod("etcd-main-2").reported(499),
				pod("etcd-main-3").reported(500), pod("etcd-main-4").reported(498))},
		{name: "then the old leader as a follower", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleParticipatingFollower,
			in: five(pod("etcd-main-0").outdated().reported(600), pod("etcd-main-1").reported(600), pod("etcd-main-2").reported(600),
				pod("etcd-main-3").leader().reported(600), pod("etcd-main-4").reported(600))},
	})
}

func TestDecisionJSONReadsTheOnePodForm(t *testing.T) {
	var d Decision
	if err := json.Unmarshal([]byte(`{"action":"delete","pod":"etcd-main-1","rule":"rollout/participating/follower","reason":"r"}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Action != ActionDelete || !slices.Equal(d.Pods, []string{"etcd-main-1"}) || d.Rule != RuleParticipatingFollower {
		t.Fatalf("decoded %+v", d)
	}
	round, err := json.Marshal(Decision{Action: ActionHandover, Pods: []string{"etcd-main-0"}, HandoverTo: "etcd-main-2", Rule: RuleHandover, Reason: "r"})
	if err != nil {
		t.Fatal(err)
	}
	var back Decision
	if err := json.Unmarshal(round, &back); err != nil || back.HandoverTo != "etcd-main-2" || !slices.Equal(back.Pods, []string{"etcd-main-0"}) {
		t.Fatalf("round trip %s → %+v (%v)", round, back, err)
	}
}
