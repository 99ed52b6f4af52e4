package rollout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// observedFromBytes turns arbitrary bytes into a plausible observation, so the fuzzer and the
// seeded random test explore the same space: up to 8 ordinals (a few beyond replicas), three
// revisions, every container class, role and terminating state, and now and then a number beyond
// MaxMembers (replicas, or a pod ordinal as a forged name would carry).
func observedFromBytes(data []byte) Observed {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	revisions := []string{newRev, oldRev, "etcd-main-mid"}
	classes := []ContainerClass{ContainerDead, ContainerTransient, ContainerAlive, ContainerUnknown}
	roles := []Role{RoleFollower, RoleLeader, RoleUnknown}
	o := Observed{Replicas: int(next() % 8), UpdateRevision: newRev}
	if next()%16 == 0 {
		o.UpdateRevision = ""
	}
	for ordinal := 0; ordinal < 8; ordinal++ {
		b := next()
		if b%4 == 0 {
			continue // missing
		}
		c := next()
		p := PodState{
			Name:        fmt.Sprintf("etcd-main-%d", ordinal),
			Ordinal:     ordinal,
			Revision:    revisions[int(b>>2)%len(revisions)],
			Terminating: b&0x80 != 0 && b&0x40 != 0,
			Container:   classes[int(c)%len(classes)],
			Role:        roles[int(c>>2)%len(roles)],
		}
		// Only a running container can pass its readiness probe.
		p.Participating = p.Container == ContainerAlive && c&0x10 != 0
		o.Pods = append(o.Pods, p)
	}
	// Now and then a pod whose name carries no ordinal, as a careless selector would let in.
	if b := next(); b%16 == 1 {
		o.Pods = append(o.Pods, PodState{Name: "stray-pod", Ordinal: -1, Revision: revisions[int(b>>4)%len(revisions)],
			Container: classes[int(b>>4)%len(classes)], Role: RoleUnknown, Participating: b&0x40 != 0})
	}
	// Now and then a number beyond the bound.
	huge := []int{MaxMembers, MaxMembers + 2, math.MaxInt32, -1}
	switch b := next(); b % 32 {
	case 1:
		o.Replicas = huge[int(b>>5)%len(huge)]
	case 2:
		n := huge[int(b>>5)%(len(huge)-1)]
		o.Pods = append(o.Pods, PodState{Name: fmt.Sprintf("etcd-main-%d", n), Ordinal: n, Revision: oldRev,
			Container: ContainerAlive, Role: RoleUnknown, Participating: b&0x10 != 0})
	}
	return o
}

// beyondBounds says whether o holds a number the planner must refuse, computed independently of
// the planner's own check.
func beyondBounds(o Observed) bool {
	if o.Replicas < 0 || o.Replicas > MaxMembers || len(o.Pods) > MaxMembers {
		return true
	}
	return slices.ContainsFunc(o.Pods, func(p PodState) bool { return p.Ordinal >= MaxMembers })
}

func checkPlanInvariants(t *testing.T, o Observed) {
	t.Helper()
	if err := planInvariantViolation(Plan, o); err != nil {
		t.Fatal(err)
	}
}

// planInvariantViolation checks the safety properties of DEP-07 for any observation and
// describes the first one Plan breaks.
func planInvariantViolation(plan func(Observed) Decision, o Observed) error {
	d := plan(o)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s\nobserved: %+v\ndecision: %+v", fmt.Sprintf(format, args...), o, d)
	}
	if d.Rule == RuleNoCandidate {
		return fail("fell through every rule")
	}
	if !conditionReasonPattern.MatchString(d.Rule.CamelCase()) {
		return fail("invalid condition reason %q", d.Rule.CamelCase())
	}
	// Out of bounds: a refusal, always, and the checks below (which loop over Replicas) would
	// themselves run away.
	if beyondBounds(o) {
		if d.Action != ActionWait || d.Rule != RuleOutOfBounds || d.Pod != "" {
			return fail("planned on an observation beyond %d members instead of refusing", MaxMembers)
		}
		return nil
	}
	if d.Rule == RuleOutOfBounds {
		return fail("refused an observation within bounds")
	}
	if again := plan(Observed{UpdateRevision: o.UpdateRevision, Replicas: o.Replicas, Pods: reversed(o.Pods)}); again.Action != d.Action || again.Pod != d.Pod || again.Rule != d.Rule {
		return fail("decision depends on pod order: %+v", again)
	}

	present := map[int]bool{}
	var terminating, updatedNotParticipating, condemned int
	for _, p := range o.Pods {
		present[p.Ordinal] = true
		inRange := p.Ordinal >= 0 && p.Ordinal < o.Replicas
		switch {
		case p.Terminating:
			terminating++
		case !inRange:
			condemned++
		case !IsOutdated(p, o.UpdateRevision) && !p.Participating:
			updatedNotParticipating++
		}
	}
	missing := 0
	for i := 0; i < o.Replicas; i++ {
		if !present[i] {
			missing++
		}
	}

	switch d.Action {
	case ActionDone:
		if o.UpdateRevision == "" || terminating > 0 || missing > 0 {
			return fail("done although the set is not settled")
		}
		for _, p := range o.Pods {
			if IsOutdated(p, o.UpdateRevision) {
				return fail("done although %s is outdated", p.Name)
			}
		}
	case ActionWait:
		if d.Pod != "" {
			return fail("wait decision names a pod to delete")
		}
	case ActionDelete:
		if d.Pod == "" {
			return fail("delete decision without a pod")
		}
		i := slices.IndexFunc(o.Pods, func(p PodState) bool { return p.Name == d.Pod })
		if i < 0 {
			return fail("deleted pod does not exist")
		}
		p := o.Pods[i]
		if !IsOutdated(p, o.UpdateRevision) || p.Terminating || o.UpdateRevision == "" {
			return fail("deleted pod %s is up to date or terminating", p.Name)
		}
		if p.Participating && (updatedNotParticipating > 0 || terminating > 0 || missing > 0 || condemned > 0) {
			return fail("deleted participating %s while the set is unsettled (updated-not-participating=%d terminating=%d missing=%d condemned=%d)",
				p.Name, updatedNotParticipating, terminating, missing, condemned)
		}
		if p.Participating {
			for _, q := range o.Pods {
				if q.Name != p.Name && IsOutdated(q, o.UpdateRevision) && !q.Participating && !q.Terminating && q.Ordinal < o.Replicas {
					return fail("deleted participating %s before non-participating %s", p.Name, q.Name)
				}
			}
		}
	default:
		return fail("unknown action %q", d.Action)
	}
	return nil
}

func reversed(pods []PodState) []PodState {
	out := slices.Clone(pods)
	slices.Reverse(out)
	return out
}

// TestPlanInvariantsRandom runs the invariants over seeded random states in every `go test`.
func TestPlanInvariantsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2026))
	buf := make([]byte, 26)
	for i := 0; i < 20000; i++ {
		for j := range buf {
			buf[j] = byte(r.UintN(256))
		}
		checkPlanInvariants(t, observedFromBytes(buf))
	}
}

func FuzzPlan(f *testing.F) {
	f.Add([]byte{3, 1, 5, 2, 6, 10, 7, 2})
	f.Add([]byte{1, 1, 5, 16})
	f.Add([]byte{5, 1, 0xc5, 0, 5, 18, 6, 20, 7, 0, 1, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkPlanInvariants(t, observedFromBytes(data))
	})
}

// TestInvariantCheckerCatchesUnsafePlans makes sure the property test can fail: a planner that
// deletes the leader while a pod is missing must be rejected.
func TestInvariantCheckerCatchesUnsafePlans(t *testing.T) {
	unsafe := func(o Observed) Decision {
		return planWith([]rule{func(v *view) verdict {
			for _, p := range v.pods {
				if p.Participating && !p.Terminating && IsOutdated(p, v.o.UpdateRevision) {
					return deletePod(RuleParticipatingLeader, p.Name, "unsafe")
				}
			}
			return verdict{}
		}}, o)
	}
	if planInvariantViolation(unsafe, observed(3, pod("etcd-main-0").outdated().leader(), pod("etcd-main-2").outdated())) == nil {
		t.Fatal("invariant checker accepted deleting a participating pod while etcd-main-1 is missing")
	}
}

func BenchmarkPlan(b *testing.B) {
	for _, members := range []int{3, 5, 7} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			var pods []*podBuilder
			for i := 0; i < members; i++ {
				p := pod(fmt.Sprintf("etcd-main-%d", i)).outdated()
				if i == 0 {
					p.leader()
				}
				pods = append(pods, p)
			}
			o := observed(members, pods...)
			b.ReportAllocs()
			for b.Loop() {
				if d := Plan(o); d.Action != ActionDelete {
					b.Fatalf("unexpected decision %+v", d)
				}
			}
		})
	}
}
