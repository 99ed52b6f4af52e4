package volumechange

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestPlan(t *testing.T) {
	standard := Claims{Name: "data", Class: "standard", Capacity: "16Gi"}
	fast := Claims{Name: "data-1a2b3c4d", Class: "fast", Capacity: "16Gi"}
	for _, tc := range []struct {
		name     string
		o        Observed
		rule     string
		claims   string
		recreate bool
		refused  bool
	}{
		{"new Etcd", Observed{Desired: standard, DefaultName: "data", Replicas: 3}, "volume/new", "data", false, false},
		{"StatefulSet gone, pods run: their claims", Observed{PodClaims: "data-1a2b3c4d", Desired: standard, DefaultName: "data", Replicas: 3},
			"volume/claims-of-running-pods", "data-1a2b3c4d", false, false},
		{"steady", Observed{Running: &standard, Desired: standard, DefaultName: "data", Replicas: 3, Ready: true}, "volume/steady", "data", false, false},
		{"class changed, all ready, leader on the last ordinal: recreate", Observed{Running: &standard, Desired: fast, DefaultName: "data", Replicas: 3, Ready: true, LeaderOrdinal: 2},
			"volume/recreate-statefulset", "data-1a2b3c4d", true, false},
		{"class changed, leader on ordinal 0: leadership moved first", Observed{Running: &standard, Desired: fast, DefaultName: "data", Replicas: 3, Ready: true},
			"volume/move-leader-to-last-ordinal", "data", false, false},
		{"class changed, no leader answered: wait", Observed{Running: &standard, Desired: fast, DefaultName: "data", Replicas: 3, Ready: true, LeaderOrdinal: -1},
			"volume/wait-leader", "data", false, false},
		{"class changed, a member not ready: wait", Observed{Running: &standard, Desired: fast, DefaultName: "data", Replicas: 3},
			"volume/wait-members-ready", "data", false, false},
		{"one member: refused", Observed{Running: &standard, Desired: fast, DefaultName: "data", Replicas: 1, Ready: true},
			"volume/refuse-fewer-than-three-members", "data", false, true},
		{"hibernated: refused", Observed{Running: &standard, Desired: fast, DefaultName: "data", Replicas: 0, Ready: true},
			"volume/refuse-fewer-than-three-members", "data", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.o)
			if string(d.Rule) != tc.rule || d.Name != tc.claims || d.Recreate != tc.recreate || d.Refused != tc.refused {
				t.Fatalf("Plan = %+v; want rule %s claims %s recreate %v refused %v", d, tc.rule, tc.claims, tc.recreate, tc.refused)
			}
		})
	}
}

// TestPlanProperties: over random observations, the claims a running StatefulSet's pods use change
// only through a recreation, and a recreation happens only with every member ready, at least
// three of them, the leader on the highest ordinal and a real change; a missing StatefulSet over
// running pods keeps their claims.
func TestPlanProperties(t *testing.T) {
	names := []string{"data", "data-aaaa", "data-bbbb"}
	classes := []string{"", "standard", "fast"}
	sizes := []string{"8Gi", "16Gi"}
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	for i := 0; i < 20000; i++ {
		o := Observed{Desired: Claims{Name: pick(names), Class: pick(classes), Capacity: pick(sizes)}, DefaultName: "data",
			Replicas: rng.IntN(6), Ready: rng.IntN(2) == 0, LeaderOrdinal: rng.IntN(7) - 1}
		if rng.IntN(4) != 0 {
			o.Running = &Claims{Name: pick(names), Class: pick(classes), Capacity: pick(sizes)}
		} else if rng.IntN(2) == 0 {
			o.PodClaims = pick(names)
		}
		d := Plan(o)
		where := fmt.Sprintf("%+v → %+v", o, d)
		if d.Rule == "" || d.Reason == "" || d.Name == "" {
			t.Fatalf("no rule, reason or claims: %s", where)
		}
		if o.Running != nil && d.Name != o.Running.Name && !d.Recreate {
			t.Fatalf("claims changed without recreating the StatefulSet: %s", where)
		}
		if d.Recreate && (!o.Ready || o.Replicas < MinMembers || o.Running == nil || o.LeaderOrdinal != o.Replicas-1 ||
			(o.Running.Class == o.Desired.Class && o.Running.Capacity == o.Desired.Capacity)) {
			t.Fatalf("recreated without every member ready, three members and a change: %s", where)
		}
		if o.Running == nil && o.PodClaims != "" && d.Name != o.PodClaims {
			t.Fatalf("a missing StatefulSet over running pods got other claims than theirs: %s", where)
		}
	}
}
