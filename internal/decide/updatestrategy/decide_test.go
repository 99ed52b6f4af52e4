package updatestrategy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

const (
	onDelete = appsv1.OnDeleteStatefulSetStrategyType
	rolling  = appsv1.RollingUpdateStatefulSetStrategyType
	newRev   = "etcd-new"
	oldRev   = "etcd-old"
)

func pods(spec ...string) []Pod {
	// spec: "name:rev:flags" with flags t (terminating) and r (ready).
	var out []Pod
	for _, s := range spec {
		f := strings.Split(s, ":")
		out = append(out, Pod{Name: f[0], Revision: f[1], Terminating: strings.Contains(f[2], "t"), Ready: strings.Contains(f[2], "r")})
	}
	return out
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       Input
		wantType appsv1.StatefulSetUpdateStrategyType
		wantRule RuleID
		wantIn   string
	}{
		{"gate on", Input{GateOn: true, Current: rolling}, onDelete, RuleGateOn, "is on"},
		{"gate off, new StatefulSet", Input{}, rolling, RuleGateOff, "no rollout step"},
		{"gate off, already RollingUpdate", Input{Current: rolling, Name: "etcd", Replicas: 3,
			Pods: pods("etcd-0:etcd-old:t")}, rolling, RuleGateOff, ""},
		{"terminating pod", Input{Current: onDelete, HoldRecorded: true, Name: "etcd", Replicas: 3, UpdateRevision: newRev,
			Pods: pods("etcd-0:etcd-new:r", "etcd-1:etcd-old:r", "etcd-2:etcd-old:rt")}, onDelete, RuleHoldTerminating, "etcd-2 terminating"},
		{"missing pod", Input{Current: onDelete, HoldRecorded: true, Name: "etcd", Replicas: 3, UpdateRevision: newRev,
			Pods: pods("etcd-0:etcd-new:r", "etcd-1:etcd-old:r")}, onDelete, RuleHoldMissing, "etcd-2 deleted"},
		{"updated pod not ready", Input{Current: onDelete, HoldRecorded: true, Name: "etcd", Replicas: 3, UpdateRevision: newRev,
			Pods: pods("etcd-0:etcd-new:", "etcd-1:etcd-old:r", "etcd-2:etcd-old:r")}, onDelete, RuleHoldUpdatedNotReady, "etcd-0 at revision etcd-new"},
		{"outdated dead pod is no step in flight", Input{Current: onDelete, HoldRecorded: true, Name: "etcd", Replicas: 3, UpdateRevision: newRev,
			Pods: pods("etcd-0:etcd-old:", "etcd-1:etcd-new:r", "etcd-2:etcd-old:r")}, rolling, RuleGateOff, ""},
		{"settled but hold not recorded yet", Input{Current: onDelete, Name: "etcd", Replicas: 3, UpdateRevision: newRev,
			Pods: pods("etcd-0:etcd-new:r", "etcd-1:etcd-old:r", "etcd-2:etcd-old:r")}, onDelete, RuleHoldAnnounce, "OnDelete controller"},
		{"no rollout in flight: a member down does not hold", Input{Current: onDelete, HoldRecorded: true, Name: "etcd", Replicas: 3, UpdateRevision: newRev,
			Pods: pods("etcd-0:etcd-new:", "etcd-1:etcd-new:r", "etcd-2:etcd-new:t")}, rolling, RuleGateOff, ""},
		{"settled and recorded", Input{Current: onDelete, HoldRecorded: true, Name: "etcd", Replicas: 3, UpdateRevision: newRev,
			Pods: pods("etcd-0:etcd-new:r", "etcd-1:etcd-old:r", "etcd-2:etcd-old:r")}, rolling, RuleGateOff, ""},
		{"replicas written past any Etcd's size", Input{Current: onDelete, HoldRecorded: true, Name: "etcd", Replicas: 2147483647, UpdateRevision: newRev,
			Pods: pods("etcd-0:etcd-new:r", "etcd-1:etcd-new:r", "etcd-2:etcd-new:r")}, onDelete, RuleHoldReplicasOutOfRange, "asks for 2147483647 replicas"},
		{"negative replicas", Input{Current: onDelete, HoldRecorded: true, Name: "etcd", Replicas: -1, UpdateRevision: newRev}, onDelete, RuleHoldReplicasOutOfRange, "asks for -1 replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.in)
			if d.Type != tc.wantType || d.Rule != tc.wantRule {
				t.Fatalf("got %s by %s (%s), want %s by %s", d.Type, d.Rule, d.Reason, tc.wantType, tc.wantRule)
			}
			if !strings.Contains(d.Reason, tc.wantIn) || !strings.Contains(d.Reason, "["+string(d.Rule)+"]") {
				t.Errorf("reason %q lacks %q or its rule", d.Reason, tc.wantIn)
			}
			if d.Held() != (d.Type == onDelete && !tc.in.GateOn) {
				t.Errorf("Held() = %v for %+v", d.Held(), d)
			}
		})
	}
}

// TestDecideNeverHandsOverMidStep: over random observations, RollingUpdate replaces OnDelete only
// when no member pod is terminating or missing, every updated pod is ready and the hold was
// recorded a pass before; the gate on always gives OnDelete.
func TestDecideNeverHandsOverMidStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 4))
	revisions := []string{newRev, oldRev, ""}
	for i := 0; i < 20000; i++ {
		in := Input{GateOn: rng.IntN(4) == 0, HoldRecorded: rng.IntN(2) == 0, UpdateRevision: revisions[rng.IntN(3)]}
		in.Current = []appsv1.StatefulSetUpdateStrategyType{onDelete, rolling, ""}[rng.IntN(3)]
		n := 1 + rng.IntN(7)
		in.Name, in.Replicas = "etcd", int32(n)
		for o := 0; o < n; o++ {
			name := fmt.Sprintf("etcd-%d", o)
			if rng.IntN(6) == 0 {
				continue
			}
			in.Pods = append(in.Pods, Pod{Name: name, Revision: revisions[rng.IntN(3)], Terminating: rng.IntN(5) == 0, Ready: rng.IntN(3) > 0})
		}
		d := Decide(in)
		if in.GateOn {
			if d.Type != onDelete {
				t.Fatalf("gate on gave %s: %+v", d.Type, in)
			}
			continue
		}
		if in.Current != onDelete || d.Type != rolling {
			continue
		}
		rollingOut, midStep := false, len(in.Pods) < int(in.Replicas)
		for _, p := range in.Pods {
			rollingOut = rollingOut || in.UpdateRevision == "" || p.Revision != in.UpdateRevision
			midStep = midStep || p.Terminating || (in.UpdateRevision != "" && p.Revision == in.UpdateRevision && !p.Ready)
		}
		if !in.HoldRecorded || (rollingOut && midStep) {
			t.Fatalf("handed over to RollingUpdate mid-step: %+v → %+v", in, d)
		}
	}
}
