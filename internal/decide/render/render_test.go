package render

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/transport"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/trustchange"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/updatestrategy"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/versionchange"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/volumechange"
)

func TestSoonestRecheckWins(t *testing.T) {
	const warnings = 30 * time.Second
	for _, tc := range []struct {
		name     string
		rechecks []Recheck
		want     time.Duration
	}{
		{name: "none", want: 0},
		{name: "one", rechecks: []Recheck{{10 * time.Second, "lease"}}, want: 10 * time.Second},
		{
			name:     "a broken backup Secret does not slow a downgrade in flight",
			rechecks: []Recheck{{VersionChangeRecheck, "version"}, {warnings, "warnings"}},
			want:     VersionChangeRecheck,
		},
		{
			name:     "nor a trust step in flight",
			rechecks: []Recheck{{TrustStepRecheck, "trust"}, {warnings, "warnings"}},
			want:     TrustStepRecheck,
		},
		{
			name:     "the order asked in does not matter",
			rechecks: []Recheck{{warnings, "warnings"}, {VolumeChangeRecheck, "volume"}, {TransportMoveRecheck, "transport"}, {VersionChangeRecheck, "version"}},
			want:     VersionChangeRecheck,
		},
		{
			name:     "a hold is the soonest of all",
			rechecks: []Recheck{{StrategyHoldRecheck, "hold"}, {VersionChangeRecheck, "version"}, {warnings, "warnings"}},
			want:     StrategyHoldRecheck,
		},
		{name: "zero asks nothing", rechecks: []Recheck{{0, "trust off"}, {2 * time.Minute, "trust"}}, want: 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Soonest(tc.rechecks).After; got != tc.want {
				t.Errorf("Soonest = %s, want %s", got, tc.want)
			}
		})
	}
}

// randomObserved draws observations over every part, each from the values its planner tells
// apart: steady and changing, refused and allowed, in flight and settled.
func randomObserved(rng *rand.Rand) Observed {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	stages := func() transport.Stages {
		modes := []transport.Stage{transport.Plain, transport.Adding, transport.TLS}
		return transport.Stages{Client: modes[rng.IntN(3)], Peer: modes[rng.IntN(3)]}
	}
	var o Observed
	o.Transport = transport.Observed{Desired: stages(), RolledOut: rng.IntN(2) == 0}
	if rng.IntN(4) != 0 {
		running := stages()
		o.Transport.Running = &running
	}
	o.Strategy = updatestrategy.Input{GateOn: rng.IntN(2) == 0, Name: "etcd", Replicas: int32(rng.IntN(4)), UpdateRevision: pick([]string{"", "r1", "r2"}),
		Current:      []appsv1.StatefulSetUpdateStrategyType{"", appsv1.OnDeleteStatefulSetStrategyType, appsv1.RollingUpdateStatefulSetStrategyType}[rng.IntN(3)],
		HoldRecorded: rng.IntN(2) == 0}
	for i := range rng.IntN(4) {
		o.Strategy.Pods = append(o.Strategy.Pods, updatestrategy.Pod{Name: fmt.Sprintf("etcd-%d", i), Revision: pick([]string{"r1", "r2"}),
			Terminating: rng.IntN(5) == 0, Ready: rng.IntN(3) != 0})
	}
	images := []string{"", "etcd:v3.6.8", "etcd:v3.5.17", "etcd:v3.7.3", "etcd:v3.4.30"}
	o.Version = versionchange.Observed{Desired: pick(images[1:]), Running: pick(images), StatefulSetReplicas: rng.IntN(4),
		Source: pick([]string{"", "3.6"}), FailedTarget: pick([]string{"", "3.5"})}
	for i := range o.Version.StatefulSetReplicas {
		v := versionchange.Version{Major: 3, Minor: 5 + rng.IntN(2)}
		o.Version.Members = append(o.Version.Members, versionchange.Member{Name: fmt.Sprintf("etcd-%d", i), Answered: rng.IntN(4) != 0,
			Server: v, Storage: v, StorageKnown: rng.IntN(2) == 0, DowngradeEnabled: rng.IntN(3) == 0})
	}
	claims := func() volumechange.Claims {
		return volumechange.Claims{Name: pick([]string{"data", "data-b"}), Class: pick([]string{"", "fast"}), Capacity: pick([]string{"8Gi", "16Gi"})}
	}
	o.Volume = volumechange.Observed{Desired: claims(), DefaultName: "data", DesiredReplicas: rng.IntN(5), Ready: rng.IntN(2) == 0,
		LeaderOrdinal: rng.IntN(5) - 1, NotSingle: rng.IntN(8) == 0, Class: volumechange.Class{Read: true, AllowExpansion: rng.IntN(2) == 0},
		Recorded: pick([]string{"", volumechange.RuleRecreate.CamelCase(), volumechange.RuleWaitMoved.CamelCase()})}
	if rng.IntN(4) != 0 {
		running := claims()
		o.Volume.Running = &running
	}
	if rng.IntN(2) == 0 {
		// Material the planner tells apart by presence alone: none, or the same held as the
		// Secrets hold (steady), with the members on it or not.
		user := trustchange.Material{}
		if rng.IntN(3) != 0 {
			user.ClientCA = []byte("ca")
		}
		held := user
		if rng.IntN(3) == 0 {
			held = trustchange.Material{}
		}
		o.Trust = &trustchange.Observed{User: user, Held: held, MembersTrustHeld: rng.IntN(2) == 0, CopiedSettled: rng.IntN(2) == 0,
			Now: time.Unix(1_800_000_000, 0)}
	}
	for _, c := range []druidv1alpha1.ConditionType{druidv1alpha1.ConditionTypeVersionChange, druidv1alpha1.ConditionTypeTrustChange} {
		if rng.IntN(2) == 0 {
			o.Conditions = append(o.Conditions, druidv1alpha1.Condition{Type: c, Status: druidv1alpha1.ConditionTrue})
		}
	}
	return o
}

// TestPlanIsEachPlannersAnswer: the merge adds nothing of its own to a part, a refusal stops the
// pass exactly when a planner refuses, and each change in flight asks to be looked at again.
func TestPlanIsEachPlannersAnswer(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	seen := map[string]bool{}
	for range 20000 {
		o := randomObserved(rng)
		d := Plan(o)
		where := fmt.Sprintf("%+v\n→ %+v", o, d)
		if !reflect.DeepEqual(d.Transport, transport.Plan(o.Transport)) || d.Strategy != updatestrategy.Decide(o.Strategy) ||
			!reflect.DeepEqual(d.Version, versionchange.Plan(o.Version)) || !reflect.DeepEqual(d.Volume, volumechange.Plan(o.Volume)) {
			t.Fatalf("a part is not its planner's answer: %s", where)
		}
		if (o.Trust == nil) != (d.Trust == nil) || (o.Trust != nil && !reflect.DeepEqual(*d.Trust, trustchange.Plan(*o.Trust))) {
			t.Fatalf("the trust part is not its planner's answer, or decided without the material: %s", where)
		}
		var refused []Part
		for _, p := range []struct {
			part    Part
			refused bool
		}{{PartTransport, d.Transport.Refused}, {PartVersion, d.Version.Refused}, {PartVolume, d.Volume.Refused}} {
			if p.refused {
				refused = append(refused, p.part)
			}
		}
		var got []Part
		for _, r := range d.Refusals {
			got = append(got, r.Part)
			if r.Reason == "" || r.Rule == "" {
				t.Fatalf("a refusal without its rule or reason: %s", where)
			}
		}
		if !slices.Equal(got, refused) {
			t.Fatalf("refusals %v, planners refused %v: %s", got, refused, where)
		}
		inFlight := d.Strategy.Held() || d.Version.Downgrading || d.Version.Action != versionchange.ActionNone || d.Volume.Waiting ||
			d.Transport.Render != o.Transport.Desired || (d.Trust != nil && (d.Trust.Write || d.Trust.Waiting))
		if next := Soonest(d.Rechecks); (next.After > 0) != inFlight {
			t.Fatalf("recheck %+v for a pass in flight=%t: %s", next, inFlight, where)
		}
		for _, c := range d.Changes {
			seen[fmt.Sprintf("%s/%s", c.Part, c.Status)] = true
			if c.Reason == "" || c.Rule == "" {
				t.Fatalf("a change recorded without its rule or reason: %s", where)
			}
		}
		if _, ok := d.Change(PartTrust); ok && o.Trust == nil {
			t.Fatalf("a trust change recorded without the material read: %s", where)
		}
		if c, ok := d.Change(PartVolume); ok && (c.Status == druidv1alpha1.ConditionTrue) != d.Volume.InFlight {
			t.Fatalf("VolumeChange %s for a change in flight=%t: %s", c.Status, d.Volume.InFlight, where)
		}
	}
	// The draws reach every condition both ways, or the checks above checked little.
	for _, want := range []string{"version/True", "version/False", "volume/True", "volume/False", "trust/True", "trust/False"} {
		if !seen[want] {
			t.Errorf("no draw recorded %s", want)
		}
	}
}

func TestChanges(t *testing.T) {
	recorded := func(c druidv1alpha1.ConditionType) []druidv1alpha1.Condition {
		return []druidv1alpha1.Condition{{Type: c, Status: druidv1alpha1.ConditionTrue}}
	}
	for _, tc := range []struct {
		name  string
		d     Decision
		conds []druidv1alpha1.Condition
		want  []Change
	}{
		{name: "steady records nothing", d: Decision{Version: versionchange.Decision{Rule: versionchange.RuleSteady, Reason: "r"}}},
		{
			name:  "steady after a change sets it False",
			d:     Decision{Version: versionchange.Decision{Rule: versionchange.RuleSteady, Reason: "r"}},
			conds: recorded(druidv1alpha1.ConditionTypeVersionChange),
			want:  []Change{{PartVersion, druidv1alpha1.ConditionTypeVersionChange, druidv1alpha1.ConditionFalse, versionchange.RuleSteady, "r", false}},
		},
		{
			name: "a refusal is True and a Warning",
			d:    Decision{Version: versionchange.Decision{Rule: versionchange.RuleRefuseUpgradeSkip, Reason: "r", Refused: true}},
			want: []Change{{PartVersion, druidv1alpha1.ConditionTypeVersionChange, druidv1alpha1.ConditionTrue, versionchange.RuleRefuseUpgradeSkip, "r", true}},
		},
		{
			name: "a rollback is False, and a Warning when a member failed",
			d: Decision{Version: versionchange.Decision{Rule: versionchange.RuleRollForwardMemberFailed, Reason: "r", Downgrading: true,
				RolledBack: true}},
			want: []Change{{PartVersion, druidv1alpha1.ConditionTypeVersionChange, druidv1alpha1.ConditionFalse, versionchange.RuleRollForwardMemberFailed, "r", true}},
		},
		{
			name: "a volume change done is False",
			d:    Decision{Volume: volumechange.Decision{Rule: volumechange.RuleDone, Reason: "r", Done: true}},
			want: []Change{{PartVolume, druidv1alpha1.ConditionTypeVolumeChange, druidv1alpha1.ConditionFalse, volumechange.RuleDone, "r", false}},
		},
		{
			name: "a new Etcd's first TLS write is no change",
			d:    Decision{Trust: &trustchange.Decision{Rule: trustchange.RuleNew, Reason: "r", Write: true}},
		},
		{
			name: "unless what it mounts fails a check",
			d:    Decision{Trust: &trustchange.Decision{Rule: trustchange.RuleNew, Reason: "r", Write: true, Warning: true}},
			want: []Change{{PartTrust, druidv1alpha1.ConditionTypeTrustChange, druidv1alpha1.ConditionTrue, trustchange.RuleNew, "r", true}},
		},
		{
			name:  "a rotation over sets TrustChange False",
			d:     Decision{Trust: &trustchange.Decision{Rule: trustchange.RuleSteady, Reason: "r"}},
			conds: recorded(druidv1alpha1.ConditionTypeTrustChange),
			want:  []Change{{PartTrust, druidv1alpha1.ConditionTypeTrustChange, druidv1alpha1.ConditionFalse, trustchange.RuleSteady, "r", false}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := changes(tc.d, tc.conds); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("changes = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
