package etcdstatus

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

var now = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

func TestStampConditionsKeepsTimesOfUnchanged(t *testing.T) {
	earlier, later := metav1.NewTime(now), metav1.NewTime(now.Add(time.Minute))
	prev := []druidv1alpha1.Condition{
		{Type: "A", Status: druidv1alpha1.ConditionTrue, Reason: "R", Message: "m", LastTransitionTime: earlier, LastUpdateTime: earlier},
		{Type: "B", Status: druidv1alpha1.ConditionTrue, Reason: "R", Message: "m", LastTransitionTime: earlier, LastUpdateTime: earlier},
		{Type: "C", Status: druidv1alpha1.ConditionTrue, Reason: "R", Message: "m", LastTransitionTime: earlier, LastUpdateTime: earlier},
	}
	got := StampConditions(prev, later,
		druidv1alpha1.Condition{Type: "A", Status: druidv1alpha1.ConditionTrue, Reason: "R", Message: "m"},
		druidv1alpha1.Condition{Type: "B", Status: druidv1alpha1.ConditionTrue, Reason: "R", Message: "other"},
		druidv1alpha1.Condition{Type: "C", Status: druidv1alpha1.ConditionFalse, Reason: "R", Message: "m"},
		druidv1alpha1.Condition{Type: "D", Status: druidv1alpha1.ConditionTrue})
	want := [][2]metav1.Time{{earlier, earlier}, {earlier, later}, {later, later}, {later, later}}
	for i, c := range got {
		if !c.LastTransitionTime.Equal(&want[i][0]) || !c.LastUpdateTime.Equal(&want[i][1]) {
			t.Errorf("%s: transition %s update %s, want %s and %s", c.Type, c.LastTransitionTime, c.LastUpdateTime, want[i][0], want[i][1])
		}
	}
}

func TestSetConditionKeepsTimesAndOthers(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	scale := druidv1alpha1.ConditionTypeScaleOperationInProgress
	ready := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeReady, Status: druidv1alpha1.ConditionTrue,
		Reason: "Quorate", LastTransitionTime: t0, LastUpdateTime: t0}
	prev := []druidv1alpha1.Condition{ready,
		{Type: scale, Status: druidv1alpha1.ConditionFalse, Reason: "Done", Message: "m", LastTransitionTime: t0, LastUpdateTime: t0}}
	for _, tc := range []struct {
		name             string
		cond             druidv1alpha1.Condition
		wantTransitionAt metav1.Time
		wantUpdateAt     metav1.Time
	}{
		{"unchanged", druidv1alpha1.Condition{Type: scale, Status: druidv1alpha1.ConditionFalse, Reason: "Done", Message: "m"}, t0, t0},
		{"new message", druidv1alpha1.Condition{Type: scale, Status: druidv1alpha1.ConditionFalse, Reason: "Done", Message: "other"}, t0, t1},
		{"new status", druidv1alpha1.Condition{Type: scale, Status: druidv1alpha1.ConditionTrue, Reason: "AddLearner", Message: "m"}, t1, t1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cond.LastUpdateTime = t1
			got := SetCondition(prev, tc.cond)
			if len(got) != 2 || got[0] != ready || got[1].Type != scale {
				t.Fatalf("SetCondition() = %+v, want Ready untouched and %s replaced in place", got, scale)
			}
			if !got[1].LastTransitionTime.Equal(&tc.wantTransitionAt) || !got[1].LastUpdateTime.Equal(&tc.wantUpdateAt) {
				t.Errorf("times = %s / %s, want %s / %s", got[1].LastTransitionTime, got[1].LastUpdateTime, tc.wantTransitionAt, tc.wantUpdateAt)
			}
			if prev[1].Message != "m" || !prev[1].LastUpdateTime.Equal(&t0) {
				t.Error("SetCondition changed its input")
			}
		})
	}
	if got := SetCondition(nil, druidv1alpha1.Condition{Type: scale, Status: druidv1alpha1.ConditionTrue, LastUpdateTime: t1}); len(got) != 1 || !got[0].LastTransitionTime.Equal(&t1) {
		t.Errorf("SetCondition() on no conditions = %+v", got)
	}
}
