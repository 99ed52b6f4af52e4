package rollout

import (
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/versionchange"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/volumechange"
)

type planCase struct {
	name     string
	in       Observed
	action   Action
	pods     []string
	rule     RuleID
	waitsFor []string
	// handoverTo is the expected target of a handover; reasonHas parts the reason must hold.
	handoverTo string
	reasonHas  []string
}

func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(tc.in)
			want := tc.pods
			if want == nil {
				want = []string{}
			}
			gotPods := got.Pods
			if gotPods == nil {
				gotPods = []string{}
			}
			if got.Action != tc.action || got.Rule != tc.rule || !slices.Equal(gotPods, want) || got.HandoverTo != tc.handoverTo {
				t.Fatalf("Plan() = %s %q (to %q) by %s (%q), want %s %v (to %q) by %s", got.Action, got.Pods, got.HandoverTo, got.Rule, got.Reason, tc.action, want, tc.handoverTo, tc.rule)
			}
			for _, part := range tc.reasonHas {
				if !strings.Contains(got.Reason, part) {
					t.Errorf("reason %q does not say %q", got.Reason, part)
				}
			}
			if tc.waitsFor != nil && !slices.Equal(got.WaitingFor, tc.waitsFor) {
				t.Errorf("WaitingFor = %v, want %v", got.WaitingFor, tc.waitsFor)
			}
			if got.Reason == "" {
				t.Errorf("empty reason")
			}
		})
	}
}

// TestRuleWithinBounds feeds the planner numbers no cluster has: it must refuse at once, naming
// the number, without sizing anything by it (before the rule existed, replicas 2147483647 made
// Plan list two billion missing pods and the manager die of out-of-memory).
func TestRuleWithinBounds(t *testing.T) {
	huge := observed(3, pod("etcd-main-0").outdated(), pod("etcd-main-1"), pod("etcd-main-2"))
	huge.StatefulSetReplicas = math.MaxInt32
	tooMany := observed(MaxMembers)
	for i := 0; i <= MaxMembers; i++ {
		tooMany.Pods = append(tooMany.Pods, pod("etcd-main-"+strconv.Itoa(i)).outdated().build())
	}
	cases := []struct {
		name string
		in   Observed
		want string
	}{
		{"replicas 2147483647", huge, "asks for 2147483647 replicas; at most 9 members"},
		{"replicas one above the bound", observed(MaxMembers + 2), "asks for 11 replicas"},
		{"negative replicas", observed(-1), "asks for -1 replicas"},
		{"more pods than the bound", tooMany, "10 member pods observed; at most 9"},
		{"huge ordinal parsed from a name", observed(3, pod("etcd-main-0").outdated(), pod("etcd-main-2147483646")),
			"pod etcd-main-2147483646 has ordinal 2147483646"},
		{"huge ordinal without a revision", Observed{StatefulSetReplicas: 3, Pods: []PodState{pod("etcd-main-2147483646").build()}},
			"has ordinal 2147483646"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(tc.in)
			if got.Action != ActionWait || got.Rule != RuleOutOfBounds || len(got.Pods) != 0 {
				t.Fatalf("Plan() = %s %q by %s (%q), want a refusal by %s", got.Action, got.Pods, got.Rule, got.Reason, RuleOutOfBounds)
			}
			if !strings.Contains(got.Reason, tc.want) {
				t.Errorf("reason %q does not say %q", got.Reason, tc.want)
			}
			if allocs := testing.AllocsPerRun(3, func() { Plan(tc.in) }); allocs > 20 {
				t.Errorf("Plan allocated %v times on out-of-bounds input; nothing should be sized by it", allocs)
			}
		})
	}
	runPlanCases(t, []planCase{
		{name: "the largest cluster is planned as usual", action: ActionDelete, pods: []string{"etcd-main-8"}, rule: RuleParticipatingFollower,
			in: observed(MaxMembers, pod("etcd-main-0"), pod("etcd-main-1"), pod("etcd-main-2"), pod("etcd-main-3"), pod("etcd-main-4"),
				pod("etcd-main-5"), pod("etcd-main-6"), pod("etcd-main-7"), pod("etcd-main-8").outdated())},
	})
}

func TestRuleUpdateRevisionKnown(t *testing.T) {
	o := observed(3, pod("etcd-main-0").outdated(), pod("etcd-main-1"), pod("etcd-main-2"))
	o.UpdateRevision = ""
	runPlanCases(t, []planCase{
		{name: "no update revision yet", in: o, action: ActionWait, rule: RuleNoUpdateRevision},
		{name: "no pods and no revision", in: Observed{StatefulSetReplicas: 3}, action: ActionWait, rule: RuleNoUpdateRevision},
	})
}

func TestRuleAllUpToDate(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "three updated pods", action: ActionDone, rule: RuleDone,
			in: observed(3, pod("etcd-main-0").leader(), pod("etcd-main-1"), pod("etcd-main-2"))},
		{name: "updated but one not participating is still done", action: ActionDone, rule: RuleDone,
			in: observed(3, pod("etcd-main-0").leader(), pod("etcd-main-1").dead(), pod("etcd-main-2"))},
		{name: "zero replicas and no pods", action: ActionDone, rule: RuleDone, in: observed(0)},
		{name: "updated pod terminating is not done", action: ActionWait, rule: RulePodTerminating,
			in: observed(3, pod("etcd-main-0"), pod("etcd-main-1").terminating(), pod("etcd-main-2"))},
		{name: "missing ordinal is not done", action: ActionWait, rule: RulePodMissing, waitsFor: []string{"etcd-main-1"},
			in: observed(3, pod("etcd-main-0"), pod("etcd-main-2"))},
		{name: "updated condemned pod does not block done", action: ActionDone, rule: RuleDone,
			in: observed(3, pod("etcd-main-0"), pod("etcd-main-1"), pod("etcd-main-2"), pod("etcd-main-3"))},
	})
}

func TestRuleNoOtherOperation(t *testing.T) {
	with := func(o Observed, kinds ...operation.Kind) Observed {
		for _, k := range kinds {
			o.Operations = append(o.Operations, operation.InFlight{Kind: k, Holder: "test"})
		}
		return o
	}
	rolling := observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated().dead())
	runPlanCases(t, []planCase{
		{name: "scale in flight holds even a dead pod", action: ActionWait, rule: RuleScaleInFlight, in: with(rolling, operation.KindScale)},
		{name: "recovery in flight", action: ActionWait, rule: RuleRecoveryInFlight, in: with(rolling, operation.KindRecovery)},
		{name: "defragmentation in flight", action: ActionWait, rule: RuleDefragmentationInFlight, in: with(rolling, operation.KindDefragmentation)},
		{name: "strategy hold", action: ActionWait, rule: RuleStrategyHoldInFlight, in: with(rolling, operation.KindStrategyHold)},
		{name: "the first in flight names the rule", action: ActionWait, rule: RuleRecoveryInFlight,
			in: with(rolling, operation.KindRecovery, operation.KindScale)},
		{name: "a rollout itself is never waited on", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleNonParticipatingDead,
			in: rolling.WithOperations(operation.Set{{Kind: operation.KindRollout}})},
		{name: "nor the version and volume changes it carries out", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleNonParticipatingDead,
			in: rolling.WithOperations(operation.In([]druidv1alpha1.Condition{
				{Type: druidv1alpha1.ConditionTypeVersionChange, Status: druidv1alpha1.ConditionTrue, Reason: versionchange.RuleReplace.CamelCase()},
				{Type: druidv1alpha1.ConditionTypeVolumeChange, Status: druidv1alpha1.ConditionTrue, Reason: volumechange.RuleWaitMoved.CamelCase()}}))},
		{name: "done is done whatever is in flight", action: ActionDone, rule: RuleDone,
			in: with(observed(3, pod("etcd-main-0").leader(), pod("etcd-main-1"), pod("etcd-main-2")), operation.KindScale)},
		{name: "a kind added later is waited on under its own id", action: ActionWait, rule: operation.WaitRule(Planner, "example-maintenance"),
			in: with(rolling, "example-maintenance")},
	})
	t.Run("HeldByOperation re-asks the rule alone", func(t *testing.T) {
		d, held := HeldByOperation(with(rolling, operation.KindDefragmentation))
		if !held || d.Rule != RuleDefragmentationInFlight || d.Action != ActionWait {
			t.Fatalf("HeldByOperation = %+v, %v; want a wait under %s", d, held, RuleDefragmentationInFlight)
		}
		if _, held := HeldByOperation(rolling); held {
			t.Fatal("held with nothing in flight")
		}
	})
}

// TestRuleNewVolumeNoQuorum: during a volume change a member that does not participate is
// replaced only while the participating voters are a quorum. The cluster of the matrix cell
// volume-move × SIGKILL: etcd-main-2 already on its new volume, not back yet; etcd-main-1 killed
// (its data on its old claim); etcd-main-0 alone. Deleting etcd-main-1 then etcd-main-0 (not
// participating either without a quorum) would leave no member with the data.
func TestRuleNewVolumeNoQuorum(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "the killed member is kept while no quorum participates", action: ActionWait, rule: RuleNewVolumeNoQuorum, waitsFor: []string{"etcd-main-1"},
			in: observed(3, pod("etcd-main-0").outdated().newVolume().leader(), pod("etcd-main-1").outdated().newVolume().unready(), pod("etcd-main-2").transient())},
		{name: "nor the last one holding data once it no longer participates", action: ActionWait, rule: RuleNewVolumeNoQuorum, waitsFor: []string{"etcd-main-0", "etcd-main-1"},
			in: observed(3, pod("etcd-main-0").outdated().newVolume().unready(), pod("etcd-main-1").outdated().newVolume().dead(), pod("etcd-main-2").transient())},
		{name: "a learner is no voter of the quorum", action: ActionWait, rule: RuleNewVolumeNoQuorum, waitsFor: []string{"etcd-main-1"},
			in: observed(3, pod("etcd-main-0").outdated().newVolume().leader(), pod("etcd-main-1").outdated().newVolume().dead(), pod("etcd-main-2").learner())},
		{name: "with a quorum participating it is replaced", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleNonParticipatingDead,
			in: observed(3, pod("etcd-main-0").outdated().newVolume().leader(), pod("etcd-main-1").outdated().newVolume().dead(), pod("etcd-main-2"))},
		{name: "on its own volume it is replaced without a quorum: it comes back with its data", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleNonParticipatingDead,
			in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated().dead(), pod("etcd-main-2").transient())},
	})
}

func TestRuleSingleNode(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "participating leader", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleSingleNode,
			in: observed(1, pod("etcd-main-0").outdated().leader())},
		{name: "dead pod", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleSingleNode,
			in: observed(1, pod("etcd-main-0").outdated().dead())},
		{name: "then wait for termination", action: ActionWait, rule: RulePodTerminating,
			in: observed(1, pod("etcd-main-0").outdated().terminating())},
		{name: "then wait for recreation", action: ActionWait, rule: RulePodMissing, waitsFor: []string{"ordinal 0"},
			in: observed(1)},
		{name: "recreated pod starting is done", action: ActionDone, rule: RuleDone,
			in: observed(1, pod("etcd-main-0").transient())},
		{name: "scale-down to one: general rules apply while pod 1 exists", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleNonParticipatingDead,
			in: observed(1, pod("etcd-main-0").outdated().dead(), pod("etcd-main-1").outdated())},
	})
}

// TestRuleNonParticipatingFirst covers every row of DEP-07's step 2 table and the ties.
func TestRuleNonParticipatingFirst(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "dead before transient before unready", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleNonParticipatingDead,
			in: observed(3, pod("etcd-main-0").outdated().unready(), pod("etcd-main-1").outdated().transient(), pod("etcd-main-2").outdated().dead())},
		{name: "transient before unready", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleNonParticipatingTransient,
			in: observed(3, pod("etcd-main-0").outdated().unready(), pod("etcd-main-1").outdated().transient(), pod("etcd-main-2").outdated())},
		{name: "unready last of the three", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleNonParticipatingAlive,
			in: observed(3, pod("etcd-main-0").outdated().unready(), pod("etcd-main-1").outdated().leader(), pod("etcd-main-2").outdated())},
		{name: "unknown container between transient and unready", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleNonParticipatingUnknown,
			in: observed(3, pod("etcd-main-0").outdated().unready(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated().unknownContainer())},
		{name: "ties go to the lowest ordinal", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleNonParticipatingDead,
			in: observed(5, pod("etcd-main-0"), pod("etcd-main-3").outdated().dead(), pod("etcd-main-1").outdated().dead(), pod("etcd-main-2"), pod("etcd-main-4"))},
		{name: "non-participating goes before a leader even if the leader is outdated", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleNonParticipatingAlive,
			in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated().unready().leader())},
		{name: "does not wait for another pod terminating", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleNonParticipatingDead,
			in: observed(3, pod("etcd-main-0").outdated().dead().terminating(), pod("etcd-main-1").outdated().dead(), pod("etcd-main-2").outdated())},
		{name: "does not wait for a missing pod", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleNonParticipatingTransient,
			in: observed(3, pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated().transient())},
		{name: "does not wait for an updated pod to rejoin", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleNonParticipatingAlive,
			in: observed(3, pod("etcd-main-0").transient(), pod("etcd-main-1").outdated().unready(), pod("etcd-main-2").outdated())},
		{name: "never picks a terminating pod", action: ActionWait, rule: RulePodTerminating, waitsFor: []string{"etcd-main-0"},
			in: observed(3, pod("etcd-main-0").outdated().dead().terminating(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated())},
		{name: "never picks a condemned pod", action: ActionWait, rule: RuleScaleDown, waitsFor: []string{"etcd-main-3"},
			in: observed(3, pod("etcd-main-0").outdated(), pod("etcd-main-1"), pod("etcd-main-2"), pod("etcd-main-3").outdated().dead())},
	})
}

// TestWaitRules covers DEP-07 step 3: nothing participating is touched while the set is not
// settled.
func TestWaitRules(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "updated pod not yet participating", action: ActionWait, rule: RuleUpdatedNotParticipating, waitsFor: []string{"etcd-main-2"},
			in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").transient())},
		{name: "updated pod crash-looping", action: ActionWait, rule: RuleUpdatedNotParticipating, waitsFor: []string{"etcd-main-0"},
			in: observed(3, pod("etcd-main-0").dead(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated().leader())},
		{name: "outdated participating pod terminating", action: ActionWait, rule: RulePodTerminating, waitsFor: []string{"etcd-main-1"},
			in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated().terminating(), pod("etcd-main-2").outdated())},
		{name: "terminating reported before missing", action: ActionWait, rule: RulePodTerminating,
			in: observed(3, pod("etcd-main-0").outdated().terminating(), pod("etcd-main-1").outdated())},
		{name: "pod deleted and not recreated yet", action: ActionWait, rule: RulePodMissing, waitsFor: []string{"etcd-main-0"},
			in: observed(3, pod("etcd-main-1").outdated().leader(), pod("etcd-main-2").outdated())},
		{name: "two missing pods", action: ActionWait, rule: RulePodMissing, waitsFor: []string{"etcd-main-0", "etcd-main-2"},
			in: observed(3, pod("etcd-main-1").outdated().leader())},
		{name: "scale-down in flight", action: ActionWait, rule: RuleScaleDown, waitsFor: []string{"etcd-main-3", "etcd-main-4"},
			in: observed(3, pod("etcd-main-0").outdated(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated().leader(), pod("etcd-main-3"), pod("etcd-main-4").outdated())},
	})
}

// TestRuleOneParticipatingAtATime covers every row of DEP-07's step 4 table.
func TestRuleOneParticipatingAtATime(t *testing.T) {
	runPlanCases(t, []planCase{
		{name: "follower before leader", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated())},
		{name: "lowest ordinal follower", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleParticipatingFollower,
			in: observed(5, pod("etcd-main-0").leader().outdated(), pod("etcd-main-1"), pod("etcd-main-4").outdated(), pod("etcd-main-2").outdated(), pod("etcd-main-3"))},
		{name: "unknown role before known leader", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleParticipatingUnknownRole,
			in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1"), pod("etcd-main-2").outdated().unknownRole())},
		{name: "follower before unknown role", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleParticipatingFollower,
			in: observed(3, pod("etcd-main-0").outdated().unknownRole(), pod("etcd-main-1"), pod("etcd-main-2").outdated())},
		{name: "leader last", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleParticipatingLeader,
			in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1"), pod("etcd-main-2"))},
		{name: "all roles unknown: lowest ordinal", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleParticipatingUnknownRole,
			in: observed(3, pod("etcd-main-0").outdated().unknownRole(), pod("etcd-main-1").outdated().unknownRole(), pod("etcd-main-2").outdated().unknownRole())},
		{name: "pod updated to a previous target counts as outdated", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleParticipatingFollower,
			in: observed(3, pod("etcd-main-0").revision("etcd-main-aaaa").leader(), pod("etcd-main-1"), pod("etcd-main-2").revision("etcd-main-aaaa"))},
		{name: "pod without revision label counts as outdated", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
			in: observed(3, pod("etcd-main-0").leader(), pod("etcd-main-1").revision(""), pod("etcd-main-2"))},
	})
}

// TestRolloutSequences replays whole rollouts, one observation per reconcile.
func TestRolloutSequences(t *testing.T) {
	t.Run("DEP-06 scenario 1: one non-participating pod", func(t *testing.T) {
		runPlanCases(t, []planCase{
			{name: "P-0 down: delete it first", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleNonParticipatingDead,
				in: observed(3, pod("etcd-main-0").outdated().dead(), pod("etcd-main-1").outdated().leader(), pod("etcd-main-2").outdated())},
			{name: "P-0 recreated, starting: wait", action: ActionWait, rule: RuleUpdatedNotParticipating,
				in: observed(3, pod("etcd-main-0").transient(), pod("etcd-main-1").outdated().leader(), pod("etcd-main-2").outdated())},
			{name: "P-0 participates: follower P-2", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleParticipatingFollower,
				in: observed(3, pod("etcd-main-0"), pod("etcd-main-1").outdated().leader(), pod("etcd-main-2").outdated())},
			{name: "P-2 back: leader P-1 last", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingLeader,
				in: observed(3, pod("etcd-main-0"), pod("etcd-main-1").outdated().leader(), pod("etcd-main-2"))},
			{name: "P-1 back: done", action: ActionDone, rule: RuleDone,
				in: observed(3, pod("etcd-main-0").leader(), pod("etcd-main-1"), pod("etcd-main-2"))},
		})
	})
	t.Run("DEP-06 scenario 2: another pod fails mid-update", func(t *testing.T) {
		runPlanCases(t, []planCase{
			{name: "P-0 down: delete it", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleNonParticipatingDead,
				in: observed(3, pod("etcd-main-0").outdated().dead(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated().leader())},
			{name: "P-1 stops participating while P-0 rejoins: delete P-1", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleNonParticipatingAlive,
				in: observed(3, pod("etcd-main-0").transient(), pod("etcd-main-1").outdated().unready(), pod("etcd-main-2").outdated().unready().leader())},
			{name: "quorum lost, P-2 unready too: delete it without waiting for P-1", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleNonParticipatingAlive,
				in: observed(3, pod("etcd-main-0").unready(), pod("etcd-main-1").outdated().unready().terminating(), pod("etcd-main-2").outdated().unready().unknownRole())},
			{name: "all recreated, waiting to rejoin", action: ActionDone, rule: RuleDone,
				in: observed(3, pod("etcd-main-0").unready(), pod("etcd-main-1").transient(), pod("etcd-main-2").transient())},
		})
	})
	t.Run("DEP-06 scenario 3: permanent quorum loss", func(t *testing.T) {
		runPlanCases(t, []planCase{
			{name: "P-0 and P-1 down, P-2 unready: P-0 first", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleNonParticipatingDead,
				in: observed(3, pod("etcd-main-0").outdated().dead(), pod("etcd-main-1").outdated().dead(), pod("etcd-main-2").outdated().unready())},
			{name: "then P-1 while P-0 terminates", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleNonParticipatingDead,
				in: observed(3, pod("etcd-main-0").outdated().dead().terminating(), pod("etcd-main-1").outdated().dead(), pod("etcd-main-2").outdated().unready())},
			{name: "then the alive P-2", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleNonParticipatingAlive,
				in: observed(3, pod("etcd-main-0").transient(), pod("etcd-main-1").outdated().dead().terminating(), pod("etcd-main-2").outdated().unready())},
			{name: "nothing outdated left to pick: wait", action: ActionWait, rule: RulePodTerminating,
				in: observed(3, pod("etcd-main-0").transient(), pod("etcd-main-1").transient(), pod("etcd-main-2").outdated().unready().terminating())},
		})
	})
	t.Run("revision changes mid-rollout", func(t *testing.T) {
		// etcd-main-2 was updated to the previous target (oldRev here is the original, "mid" the
		// abandoned target); the new target makes every pod outdated again.
		runPlanCases(t, []planCase{
			{name: "pod at abandoned target is a follower candidate like the rest", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
				in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").revision("etcd-main-mid"))},
			{name: "abandoned target still starting: it is outdated and non-participating, replace it", action: ActionDelete, pods: []string{"etcd-main-2"}, rule: RuleNonParticipatingTransient,
				in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").revision("etcd-main-mid").transient())},
		})
	})
	t.Run("handover from a half-done RollingUpdate", func(t *testing.T) {
		runPlanCases(t, []planCase{
			{name: "ordinal 2 already rolled and ready: continue with followers", action: ActionDelete, pods: []string{"etcd-main-1"}, rule: RuleParticipatingFollower,
				in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2"))},
			{name: "rolled pod stalled: keep waiting like the StatefulSet controller did", action: ActionWait, rule: RuleUpdatedNotParticipating,
				in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").dead())},
			{name: "rolled pod stalled but an outdated one is down too: replace the down one", action: ActionDelete, pods: []string{"etcd-main-0"}, rule: RuleNonParticipatingDead,
				in: observed(3, pod("etcd-main-0").outdated().dead(), pod("etcd-main-1").outdated().leader(), pod("etcd-main-2").transient())},
			{name: "rolling update was deleting ordinal 2 when it stopped", action: ActionWait, rule: RulePodTerminating,
				in: observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated().terminating())},
		})
	})
}

func TestPlanDoesNotModifyInput(t *testing.T) {
	o := observed(3, pod("etcd-main-2").outdated(), pod("etcd-main-0").outdated().leader().handoverFailedTo("etcd-main-2", "etcd-main-1"), pod("etcd-main-1").outdated())
	before := slices.Clone(o.Pods)
	for i := range before {
		before[i].HandoverFailedTo = slices.Clone(before[i].HandoverFailedTo)
	}
	Plan(o)
	if !reflect.DeepEqual(o.Pods, before) {
		t.Fatalf("Plan reordered or changed its input: %v", o.Pods)
	}
}

var conditionReasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// TestRuleReasons pins the condition and Event reasons of the rollout rules, which users see
// (the conversion itself is tested in package ruleid).
func TestRuleReasons(t *testing.T) {
	cases := []struct {
		rule RuleID
		want string
	}{
		{RuleDone, "RolloutDone"},
		{RuleNonParticipatingDead, "RolloutNonParticipatingDead"},
		{RuleNonParticipatingAlive, "RolloutNonParticipatingAliveUnready"},
		{RuleUpdatedNotParticipating, "RolloutWaitUpdatedNotParticipating"},
		{RuleParticipatingUnknownRole, "RolloutParticipatingUnknownRole"},
		{RuleSingleNode, "RolloutSingleNode"},
		{RuleNoUpdateRevision, "RolloutWaitNoUpdateRevision"},
		{RuleQuorumHeadroom, "RolloutWaitQuorumHeadroom"},
		{RuleHandover, "RolloutHandoverMoveLeader"},
		{RuleScaleInFlight, "RolloutWaitOperationInFlightScale"},
		{RuleStrategyHoldInFlight, "RolloutWaitOperationInFlightStrategyHold"},
	}
	for _, tc := range cases {
		t.Run(string(tc.rule), func(t *testing.T) {
			if got := tc.rule.CamelCase(); got != tc.want {
				t.Fatalf("CamelCase(%q) = %q, want %q", tc.rule, got, tc.want)
			}
		})
	}
	for _, r := range allRules {
		if got := r.CamelCase(); !conditionReasonPattern.MatchString(got) {
			t.Errorf("CamelCase(%q) = %q is not a valid condition reason", r, got)
		}
	}
}

var allRules = []RuleID{
	RuleNoUpdateRevision, RuleDone, RuleSingleNode, RuleNonParticipatingDead, RuleNonParticipatingTransient,
	RuleNonParticipatingUnknown, RuleNonParticipatingAlive, RulePodTerminating, RulePodMissing,
	RuleUpdatedNotParticipating, RuleScaleDown, RuleParticipatingFollower, RuleParticipatingUnknownRole,
	RuleParticipatingLeader, RuleNoCandidate, RuleQuorumHeadroom, RuleCatchUp, RuleHandover, RuleLeaderNoTransferee,
	RuleLeaderHandoverFailed, RuleOutOfBounds, RuleScaleInFlight, RuleRecoveryInFlight, RuleDefragmentationInFlight,
	RuleStrategyHoldInFlight,
}

func TestReasonCarriesNumbers(t *testing.T) {
	got := Plan(observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-1").outdated(), pod("etcd-main-2").transient()))
	want := "waiting for etcd-main-2 (updated) to rejoin the quorum; 2/3 participating, 2 outdated"
	if got.Reason != want {
		t.Fatalf("reason = %q, want %q", got.Reason, want)
	}
}
