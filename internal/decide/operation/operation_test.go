package operation

import (
	"slices"
	"testing"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/versionchange"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/volumechange"
)

func TestIn(t *testing.T) {
	cond := func(ct druidv1alpha1.ConditionType, st druidv1alpha1.ConditionStatus) druidv1alpha1.Condition {
		return druidv1alpha1.Condition{Type: ct, Status: st, Reason: "Step", Message: "detail"}
	}
	for _, tc := range []struct {
		name  string
		conds []druidv1alpha1.Condition
		want  []Kind
	}{
		{name: "none", want: nil},
		{name: "false and unknown hold nothing", conds: []druidv1alpha1.Condition{
			cond(druidv1alpha1.ConditionTypeScaleOperationInProgress, druidv1alpha1.ConditionFalse),
			cond(druidv1alpha1.ConditionTypeRecoveryInProgress, druidv1alpha1.ConditionUnknown)}},
		{name: "other conditions are no operation", conds: []druidv1alpha1.Condition{
			cond(druidv1alpha1.ConditionTypeReady, druidv1alpha1.ConditionTrue)}},
		{name: "in the order of Holds", conds: []druidv1alpha1.Condition{
			cond(druidv1alpha1.ConditionTypeUpdateStrategyHeld, druidv1alpha1.ConditionTrue),
			cond(druidv1alpha1.ConditionTypeDefragmentationInProgress, druidv1alpha1.ConditionTrue),
			cond(druidv1alpha1.ConditionTypeScaleOperationInProgress, druidv1alpha1.ConditionTrue)},
			want: []Kind{KindScale, KindDefragmentation, KindStrategyHold}},
		{name: "a version and a volume change under way", conds: []druidv1alpha1.Condition{
			stepOf(druidv1alpha1.ConditionTypeVolumeChange, volumechange.RuleRecreate),
			stepOf(druidv1alpha1.ConditionTypeVersionChange, versionchange.RuleWaitStorage)},
			want: []Kind{KindVersionChange, KindVolumeChange}},
		{name: "a change refused, or waiting on what others may do first, holds nobody", conds: []druidv1alpha1.Condition{
			stepOf(druidv1alpha1.ConditionTypeVersionChange, versionchange.RuleRefuseUpgradeSkip),
			stepOf(druidv1alpha1.ConditionTypeVolumeChange, volumechange.RuleWaitReady)}},
		{name: "nor before a downgrade's first call", conds: []druidv1alpha1.Condition{
			stepOf(druidv1alpha1.ConditionTypeVersionChange, versionchange.RuleWaitMembers),
			stepOf(druidv1alpha1.ConditionTypeVolumeChange, volumechange.RuleRefuseFew)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Kind
			for _, f := range In(tc.conds) {
				got = append(got, f.Kind)
				if f.Step == "" || f.Detail != "detail" || f.Holder == "" {
					t.Errorf("%s: step %q, detail %q, holder %q: the condition's reason, message and holder", f.Kind, f.Step, f.Detail, f.Holder)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("In = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("nil Etcd", func(t *testing.T) {
		if got := Of(nil); len(got) != 0 {
			t.Fatalf("Of(nil) = %v", got)
		}
	})
}

// stepOf is a True condition of type ct at the step of rule.
func stepOf(ct druidv1alpha1.ConditionType, rule ruleid.ID) druidv1alpha1.Condition {
	return druidv1alpha1.Condition{Type: ct, Status: druidv1alpha1.ConditionTrue, Reason: rule.CamelCase(), Message: "detail"}
}

func TestExceptWhatItCarriesOut(t *testing.T) {
	s := In([]druidv1alpha1.Condition{stepOf(druidv1alpha1.ConditionTypeVersionChange, versionchange.RuleReplace),
		stepOf(druidv1alpha1.ConditionTypeVolumeChange, volumechange.RuleWaitMoved)})
	if got := s.Except(KindRollout); len(got) != 0 {
		t.Errorf("the rollout waits on the changes it carries out: %v", got)
	}
	// The membership controller adds each member a volume change replaced back as a learner: it
	// waits on a downgrade, not on the volume change it helps carry out.
	if got := s.Except(KindScale); len(got) != 1 || got[0].Kind != KindVersionChange {
		t.Errorf("a scale waits on %v, want the version change alone", got)
	}
	if got := s.Except(KindDefragmentation); len(got) != 2 {
		t.Errorf("a defragmentation does not wait on a version and a volume change under way: %v", got)
	}
}

func TestSet(t *testing.T) {
	s := Set{{Kind: KindScale}, {Kind: KindRecovery}}
	if got := s.Except(KindScale); len(got) != 1 || got[0].Kind != KindRecovery {
		t.Fatalf("Except(scale) = %v", got)
	}
	if len(s) != 2 {
		t.Fatal("Except changed the set it was called on")
	}
	if !s.Has(KindRecovery) || s.Has(KindDefragmentation) {
		t.Fatalf("Has is wrong on %v", s)
	}
	if id := WaitRule("rollout", KindDefragmentation); id != "rollout/wait/operation-in-flight/defragmentation" || !IsWaitRule(id) {
		t.Fatalf("WaitRule = %q", id)
	}
	if IsWaitRule("defrag/wait/rollout-in-flight") {
		t.Fatal("a planner's own wait taken for a wait on another operation")
	}
}

func TestRolloutInFlight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		revision string
		pods     []Pod
		want     bool
	}{
		{name: "all at the revision", revision: "r2", pods: []Pod{{Revision: "r2"}, {Revision: "r2"}}},
		{name: "one outdated", revision: "r2", pods: []Pod{{Revision: "r2"}, {Revision: "r1"}}, want: true},
		{name: "one terminating", revision: "r2", pods: []Pod{{Revision: "r2", Terminating: true}}, want: true},
		{name: "no revision yet: nothing is outdated", pods: []Pod{{Revision: "r1"}}},
		{name: "no revision, a pod terminating", pods: []Pod{{Terminating: true}}, want: true},
		{name: "no pods (missing is not a rollout)", revision: "r2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RolloutInFlight(tc.revision, tc.pods); got != tc.want {
				t.Fatalf("RolloutInFlight = %v, want %v", got, tc.want)
			}
		})
	}
}
