package volumechange

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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
		{"new Etcd", Observed{Desired: standard, DefaultName: "data", DesiredReplicas: 3}, "volume/new", "data", false, false},
		{"a StatefulSet without a single claim template of ours: as created", Observed{NotSingle: true, Desired: fast, DefaultName: "data", DesiredReplicas: 3},
			"volume/steady", "data", false, false},
		{"StatefulSet gone, pods run: their claims", Observed{PodClaims: "data-1a2b3c4d", Desired: standard, DefaultName: "data", DesiredReplicas: 3},
			"volume/claims-of-running-pods", "data-1a2b3c4d", false, false},
		{"steady", Observed{Running: &standard, Desired: standard, DefaultName: "data", DesiredReplicas: 3, Ready: true}, "volume/steady", "data", false, false},
		{"class changed, all ready, leader on the last ordinal: recreate", Observed{Running: &standard, Desired: fast, DefaultName: "data", DesiredReplicas: 3, Ready: true, LeaderOrdinal: 2},
			"volume/recreate-statefulset", "data-1a2b3c4d", true, false},
		{"class changed, leader on ordinal 0: leadership moved first", Observed{Running: &standard, Desired: fast, DefaultName: "data", DesiredReplicas: 3, Ready: true},
			"volume/move-leader-to-last-ordinal", "data", false, false},
		{"class changed, no leader answered: wait", Observed{Running: &standard, Desired: fast, DefaultName: "data", DesiredReplicas: 3, Ready: true, LeaderOrdinal: -1},
			"volume/wait-leader", "data", false, false},
		{"class changed, a member not ready: wait", Observed{Running: &standard, Desired: fast, DefaultName: "data", DesiredReplicas: 3},
			"volume/wait-members-ready", "data", false, false},
		{"one member: refused", Observed{Running: &standard, Desired: fast, DefaultName: "data", DesiredReplicas: 1, Ready: true},
			"volume/refuse-fewer-than-three-members", "data", false, true},
		{"hibernated: refused", Observed{Running: &standard, Desired: fast, DefaultName: "data", DesiredReplicas: 0, Ready: true},
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
			DesiredReplicas: rng.IntN(6), Ready: rng.IntN(2) == 0, LeaderOrdinal: rng.IntN(7) - 1}
		if rng.IntN(4) != 0 {
			o.Running = &Claims{Name: pick(names), Class: pick(classes), Capacity: pick(sizes)}
		} else if rng.IntN(2) == 0 {
			o.PodClaims = pick(names)
		}
		o.Class = Class{Name: pick(classes), Read: rng.IntN(3) != 0, AllowExpansion: rng.IntN(2) == 0}
		o.Recorded = pick([]string{"", RuleExpandClaims.CamelCase(), RuleWaitExpanded.CamelCase(), RuleRecreate.CamelCase(), RuleWaitMoved.CamelCase()})
		o.Mounted = map[string]string{}
		for i := range o.DesiredReplicas {
			pod := fmt.Sprintf("etcd-%d", i)
			o.Members = append(o.Members, pod)
			if rng.IntN(5) != 0 {
				o.Mounted[pod] = pick(names)
			}
		}
		for i := range rng.IntN(8) {
			template, pod := pick(names), fmt.Sprintf("etcd-%d", i%6)
			o.Claims = append(o.Claims, Claim{Name: template + "-" + pod, Template: template, Pod: pod,
				Requested: pick(sizes), Capacity: pick(append(sizes, "")), Bound: rng.IntN(4) != 0})
		}
		d := Plan(o)
		where := fmt.Sprintf("%+v → %+v", o, d)
		if d.Rule == "" || d.Reason == "" || d.Name == "" {
			t.Fatalf("no rule, reason or claims: %s", where)
		}
		if o.Running != nil && d.Name != o.Running.Name && !d.Recreate {
			t.Fatalf("claims changed without recreating the StatefulSet: %s", where)
		}
		if d.Recreate && d.Name != o.Running.Name && (!o.Ready || o.DesiredReplicas < MinMembers || o.LeaderOrdinal != o.DesiredReplicas-1 ||
			(o.Running.Class == o.Desired.Class && o.Running.Capacity == o.Desired.Capacity)) {
			t.Fatalf("moved to new claims without every member ready, three members and a change: %s", where)
		}
		if d.Recreate && d.Name == o.Running.Name && (d.Rule != RuleExpandClaims || !expandable(o.Class) || !grows(*o.Running, o.Desired)) {
			t.Fatalf("recreated on the same claims without a growth the class allows: %s", where)
		}
		if d.Recreate && d.Name != o.Running.Name {
			for _, c := range o.Claims {
				if c.Template == d.Name {
					t.Fatalf("members moved onto claims that exist (old data): %s", where)
				}
			}
		}
		if len(d.Expand) > 0 && !expandable(o.Class) {
			t.Fatalf("claims grown in a class that does not allow it: %s", where)
		}
		for _, name := range d.Expand {
			if !slices.ContainsFunc(o.Claims, func(c Claim) bool {
				return c.Name == name && c.Bound && c.Template == o.Running.Name && less(c.Requested, d.ExpandTo)
			}) {
				t.Fatalf("grown claim %s is no bound running claim below %s: %s", name, d.ExpandTo, where)
			}
		}
		if d.Done && (o.Recorded == "" || d.InFlight || d.Waiting) {
			t.Fatalf("done without a change recorded in flight: %s", where)
		}
		for _, k := range d.Kept {
			if slices.ContainsFunc(o.Claims, func(c Claim) bool {
				return c.Name == k && (c.Template == d.Name || slices.Contains(mapValues(o.Mounted), c.Template))
			}) {
				t.Fatalf("claim %s named kept while a member mounts its template: %s", k, where)
			}
		}
		if o.Running != nil && o.Recorded == "" && o.Running.Class == o.Desired.Class && o.Running.Capacity == o.Desired.Capacity && d.Rule != RuleSteady {
			t.Fatalf("a settled Etcd with nothing recorded is not steady: %s", where)
		}
		if o.Running == nil && o.PodClaims != "" && d.Name != o.PodClaims {
			t.Fatalf("a missing StatefulSet over running pods got other claims than theirs: %s", where)
		}
	}
}

// claimsOf builds the data claims of template for pods etcd-0.. etcd-(n-1), each asking and
// holding size.
func claimsOf(template string, n int, requested, capacity string) []Claim {
	var out []Claim
	for i := range n {
		pod := fmt.Sprintf("etcd-%d", i)
		out = append(out, Claim{Name: template + "-" + pod, Template: template, Pod: pod, Requested: requested, Capacity: capacity, Bound: true})
	}
	return out
}

func membersOn(template string, n int) ([]string, map[string]string) {
	var pods []string
	mounted := map[string]string{}
	for i := range n {
		pod := fmt.Sprintf("etcd-%d", i)
		pods = append(pods, pod)
		mounted[pod] = template
	}
	return pods, mounted
}

func TestPlanExpand(t *testing.T) {
	small := Claims{Name: "data", Class: "standard", Capacity: "16Gi"}
	big := Claims{Name: "data-9f9f9f9f", Class: "standard", Capacity: "20Gi"}
	grown := Claims{Name: "data", Class: "standard", Capacity: "20Gi"}
	allows := Class{Name: "standard", Read: true, AllowExpansion: true}
	pods, mounted := membersOn("data", 3)
	observed := func(running Claims, desired Claims, class Class, claims []Claim, recorded string) Observed {
		return Observed{Running: &running, Desired: desired, DefaultName: "data", DesiredReplicas: 3, Ready: true, LeaderOrdinal: 2,
			Class: class, Members: pods, Mounted: mounted, Claims: claims, Recorded: recorded}
	}
	for _, tc := range []struct {
		name     string
		o        Observed
		rule     string
		claims   string
		recreate bool
		expand   []string
	}{
		{"growth, class allows: claims grown, StatefulSet recreated on the same claims",
			observed(small, big, allows, claimsOf("data", 3, "16Gi", "16Gi"), ""),
			"volume/expand-claims", "data", true, []string{"data-etcd-0", "data-etcd-1", "data-etcd-2"}},
		{"growth on one member: grown too (nothing is taken from it)",
			Observed{Running: &small, Desired: big, DesiredReplicas: 1, Class: allows, Claims: claimsOf("data", 1, "16Gi", "16Gi")},
			"volume/expand-claims", "data", true, []string{"data-etcd-0"}},
		{"growth, a member not ready: grown anyway (online)",
			Observed{Running: &small, Desired: big, DesiredReplicas: 3, Class: allows, Claims: claimsOf("data", 3, "16Gi", "16Gi")},
			"volume/expand-claims", "data", true, []string{"data-etcd-0", "data-etcd-1", "data-etcd-2"}},
		{"growth, class does not allow: members move",
			observed(small, big, Class{Name: "standard", Read: true}, claimsOf("data", 3, "16Gi", "16Gi"), ""),
			"volume/recreate-statefulset", "data-9f9f9f9f", true, nil},
		{"growth, class cannot be read: members move",
			observed(small, big, Class{Name: "standard", Err: "not found"}, claimsOf("data", 3, "16Gi", "16Gi"), ""),
			"volume/recreate-statefulset", "data-9f9f9f9f", true, nil},
		{"shrink, class allows: members move",
			observed(Claims{Name: "data", Class: "standard", Capacity: "20Gi"}, Claims{Name: "data-1", Class: "standard", Capacity: "16Gi"}, allows, nil, ""),
			"volume/recreate-statefulset", "data-1", true, nil},
		{"class change and growth, old class allows: members move",
			observed(small, Claims{Name: "data-2", Class: "fast", Capacity: "20Gi"}, allows, nil, ""),
			"volume/recreate-statefulset", "data-2", true, nil},
		{"StatefulSet recreated, claims asked for more, not there yet: wait",
			observed(grown, big, allows, func() []Claim {
				c := claimsOf("data", 3, "20Gi", "20Gi")
				c[1].Capacity, c[1].Resizing = "16Gi", "FileSystemResizePending"
				return c
			}(), "VolumeExpandClaims"),
			"volume/wait-claims-expanded", "data", false, nil},
		{"StatefulSet recreated, a claim missed its new request: grown",
			observed(grown, big, allows, func() []Claim {
				c := claimsOf("data", 3, "20Gi", "20Gi")
				c[2].Requested, c[2].Capacity = "16Gi", "16Gi"
				return c
			}(), "VolumeWaitClaimsExpanded"),
			"volume/expand-claims", "data", false, []string{"data-etcd-2"}},
		{"a claim not bound yet: not grown (refused), waited for",
			observed(grown, big, allows, func() []Claim {
				c := claimsOf("data", 3, "20Gi", "20Gi")
				c[0].Requested, c[0].Capacity, c[0].Bound = "16Gi", "", false
				return c
			}(), "VolumeExpandClaims"),
			"volume/wait-claims-expanded", "data", false, nil},
		{"every claim grown: expanded",
			observed(grown, big, allows, claimsOf("data", 3, "20Gi", "20Gi"), "VolumeWaitClaimsExpanded"),
			"volume/claims-expanded", "data", false, nil},
		{"moved, a member still on the old claims: wait",
			Observed{Running: &big, Desired: big, DesiredReplicas: 3, Ready: true, Members: pods,
				Mounted: map[string]string{"etcd-0": "data-9f9f9f9f", "etcd-1": "data-9f9f9f9f", "etcd-2": "data"}, Recorded: "VolumeRecreateStatefulset"},
			"volume/wait-members-moved", "data-9f9f9f9f", false, nil},
		{"moved on the StatefulSet, the pods still mount the old claims: wait",
			observed(big, big, Class{}, append(claimsOf("data", 3, "16Gi", "16Gi"), claimsOf("data-9f9f9f9f", 3, "20Gi", "20Gi")...), "VolumeRecreateStatefulset"),
			"volume/wait-members-moved", "data-9f9f9f9f", false, nil},
		{"settled, nothing recorded: steady, nothing read",
			Observed{Running: &big, Desired: big, DesiredReplicas: 3, Ready: true},
			"volume/steady", "data-9f9f9f9f", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.o)
			if string(d.Rule) != string(tc.rule) || d.Name != tc.claims || d.Recreate != tc.recreate || !slices.Equal(d.Expand, tc.expand) {
				t.Fatalf("Plan = %+v; want rule %s claims %s recreate %v expand %v", d, tc.rule, tc.claims, tc.recreate, tc.expand)
			}
		})
	}
}

// TestPlanDoneNamesKeptClaims: once every member is on the new claims, the change is done and the
// claims of templates no member mounts are named, and only those.
func TestPlanDoneNamesKeptClaims(t *testing.T) {
	big := Claims{Name: "data-9f9f9f9f", Class: "fast", Capacity: "20Gi"}
	pods, mounted := membersOn("data-9f9f9f9f", 3)
	claims := append(claimsOf("data", 3, "16Gi", "16Gi"), claimsOf("data-9f9f9f9f", 4, "20Gi", "20Gi")...)
	d := Plan(Observed{Running: &big, Desired: big, DesiredReplicas: 3, Ready: true, Members: pods, Mounted: mounted, Claims: claims,
		Recorded: RuleWaitMoved.CamelCase()})
	want := []string{"data-etcd-0", "data-etcd-1", "data-etcd-2"}
	if d.Rule != RuleDone || !d.Done || d.InFlight || !slices.Equal(d.Kept, want) {
		t.Fatalf("Plan = %+v; want %s, done, kept %v", d, RuleDone, want)
	}
	for _, c := range want {
		if !strings.Contains(d.Reason, c) {
			t.Errorf("reason %q does not name kept claim %s", d.Reason, c)
		}
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
