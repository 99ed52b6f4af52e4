package rollout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
)

// observedFromBytes turns arbitrary bytes into a plausible observation, so the fuzzer and the
// seeded random test explore the same space: up to 8 ordinals (a few beyond replicas), three
// revisions, every container class, role and terminating state, and now and then a number beyond
// MaxMembers (replicas, or a pod ordinal as a forged name would carry).
func observedFromBytes(data []byte) Observed {
	next := byteSource(data)
	revisions := []string{newRev, oldRev, "etcd-main-mid"}
	classes := []ContainerClass{ContainerDead, ContainerTransient, ContainerAlive, ContainerUnknown}
	roles := []Role{RoleFollower, RoleLeader, RoleUnknown}
	o := Observed{StatefulSetReplicas: int(next() % 8), UpdateRevision: newRev}
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
		p.Member, p.HandoverFailures = memberFromByte(next())
		p.HandoverFailedTo = failedTargetsFromByte(p.HandoverFailures, next())
		o.Pods = append(o.Pods, p)
	}
	o.Policy = policyFromByte(next())
	// Now and then another operation in flight.
	if b := next(); b%8 == 3 {
		o.Operations = operation.Set{{Kind: []operation.Kind{operation.KindScale, operation.KindRecovery,
			operation.KindDefragmentation, operation.KindStrategyHold}[int(b>>3)%4]}}
	}
	// Now and then the backup gate holds (BackupReady False, waiting configured): from bits of
	// the first byte that the replica count does not use, since the pods use up the rest.
	if len(data) > 0 && data[0]&0x30 == 0x10 {
		o.Backup = backupgate.Gate{Holds: true, Reason: "UploadFailed"}
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
		o.StatefulSetReplicas = huge[int(b>>5)%len(huge)]
	case 2:
		n := huge[int(b>>5)%(len(huge)-1)]
		o.Pods = append(o.Pods, PodState{Name: fmt.Sprintf("etcd-main-%d", n), Ordinal: n, Revision: oldRev,
			Container: ContainerAlive, Role: RoleUnknown, Participating: b&0x10 != 0})
	}
	return o
}

// lagSteps straddle the catch-up bounds the generated policies use (0 and 1000 entries).
var lagSteps = []uint64{0, 0, 1, 999, 1000, 1001, 50000}

// memberFromByte is what a member said: answered or not, its applied index below a common
// leader index, now and then a learner; and failed handovers recorded on the pod.
func memberFromByte(m byte) (MemberStatus, int) {
	if m&1 == 0 {
		return MemberStatus{Learner: m&0x0e == 0x0e}, int(m>>6) % 4
	}
	return MemberStatus{Reported: true, AppliedIndex: 100000 - lagSteps[int(m>>1)%len(lagSteps)], Learner: m&0x70 == 0x70}, int(m>>6) % 4
}

// failedTargetsFromByte names the members n failed handovers went to: pods of the cluster,
// now and then the same twice (one name then), a pod that is not there (etcd-main-8) or none
// recorded at all (failures counted before the targets were).
func failedTargetsFromByte(n int, b byte) []string {
	if b%8 == 0 {
		return nil
	}
	var names []string
	for i := range n {
		name := fmt.Sprintf("etcd-main-%d", (int(b>>3)+i*int(b%4+1))%9)
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// policyFromByte covers the zero policy (DEP-07 as written), concurrency 0–4, the catch-up
// gate with a strict and the default bound, and handover with 0–3 attempts.
func policyFromByte(b byte) Policy {
	return Policy{
		MaxConcurrent:      int(b % 5),
		CatchUp:            b&0x08 != 0,
		MaxAppliedIndexLag: []uint64{0, DefaultMaxAppliedIndexLag}[int(b>>4)&1],
		Handover:           b&0x20 != 0,
		HandoverAttempts:   int(b>>6) % 4,
	}
}

// byteSource hands out data one byte at a time, then zeros, so every input is a state.
func byteSource(data []byte) func() byte {
	return func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
}

// beyondBounds says whether o holds a number the planner must refuse, computed independently of
// the planner's own check.
func beyondBounds(o Observed) bool {
	if o.StatefulSetReplicas < 0 || o.StatefulSetReplicas > MaxMembers || len(o.Pods) > MaxMembers {
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

// planInvariantViolation checks the safety properties of DEP-07 and of the rules beyond it
// (quorum headroom, catch-up, handover) for any observation, computed independently of the
// planner, and describes the first one Plan breaks.
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
		if d.Action != ActionWait || d.Rule != RuleOutOfBounds || len(d.Pods) != 0 {
			return fail("planned on an observation beyond %d members instead of refusing", MaxMembers)
		}
		return nil
	}
	if d.Rule == RuleOutOfBounds {
		return fail("refused an observation within bounds")
	}
	if again := plan(Observed{UpdateRevision: o.UpdateRevision, StatefulSetReplicas: o.StatefulSetReplicas, Pods: reversed(o.Pods), Policy: o.Policy, Operations: o.Operations, Backup: o.Backup}); again.Action != d.Action ||
		!slices.Equal(again.Pods, d.Pods) || again.Rule != d.Rule || again.HandoverTo != d.HandoverTo {
		return fail("decision depends on pod order: %+v", again)
	}

	// One operation at a time: while another is in flight nothing is deleted and no leadership
	// moves, and the wait names it.
	if len(o.Operations) > 0 && d.Action != ActionDone && (d.Action != ActionWait || len(d.Pods) != 0) {
		return fail("acted while %s is in flight", o.Operations[0].Kind)
	}
	// DEP-01: while BackupReady is False (and waiting for it is on) no participating member is
	// replaced and no leadership moves; only members that do not participate are.
	if o.Backup.Holds {
		if d.Action == ActionHandover {
			return fail("moved leadership while the backup is not ready")
		}
		for _, name := range d.Pods {
			for _, p := range o.Pods {
				if p.Name == name && p.Participating && d.Action == ActionDelete {
					return fail("deleted participating %s while the backup is not ready", name)
				}
			}
		}
	}
	inRange := func(p PodState) bool { return p.Ordinal >= 0 && p.Ordinal < o.StatefulSetReplicas }
	present := map[int]bool{}
	var terminating, updatedNotParticipating, condemned, unavailable int
	for _, p := range o.Pods {
		present[p.Ordinal] = true
		if inRange(p) && (p.Terminating || !p.Participating || p.Member.Learner) {
			unavailable++
		}
		switch {
		case p.Terminating:
			terminating++
		case !inRange(p):
			condemned++
		case !IsOutdated(p, o.UpdateRevision) && !p.Participating:
			updatedNotParticipating++
		}
	}
	missing := 0
	for i := 0; i < o.StatefulSetReplicas; i++ {
		if !present[i] {
			missing++
		}
	}
	unavailable += missing
	headroom := quorum.Headroom(o.StatefulSetReplicas)
	concurrent := o.Policy.MaxConcurrent > 1
	byName := func(name string) (PodState, bool) {
		i := slices.IndexFunc(o.Pods, func(p PodState) bool { return p.Name == name })
		if i < 0 {
			return PodState{}, false
		}
		return o.Pods[i], true
	}
	// takesParticipating checks what taking the participating pods in taken away must respect.
	takesParticipating := func(taken []PodState) error {
		if len(taken) == 0 {
			return nil
		}
		if !concurrent && (updatedNotParticipating > 0 || terminating > 0 || missing > 0) {
			return fail("took participating %s while the set is unsettled (updated-not-participating=%d terminating=%d missing=%d)",
				names(taken), updatedNotParticipating, terminating, missing)
		}
		if condemned > 0 {
			return fail("took participating %s during a scale-down", names(taken))
		}
		// The headroom property: the voters not participating afterwards never exceed it.
		if after := unavailable + len(taken); after > headroom {
			return fail("%d voters not participating afterwards (%d before, %d taken), headroom %d of %d", after, unavailable, len(taken), headroom, o.StatefulSetReplicas)
		}
		for _, q := range o.Pods {
			if IsOutdated(q, o.UpdateRevision) && !q.Participating && !q.Terminating && inRange(q) {
				return fail("took participating %s before non-participating %s", names(taken), q.Name)
			}
		}
		// Catch-up: every voter left is within bound of the leader's applied index, or when the
		// leader reported none, of the highest any participating voter reported (a lower bound),
		// and no follower left is without an index once any member reported one.
		var leaderIndex, highest uint64
		for _, q := range o.Pods {
			if q.Participating && !q.Terminating && inRange(q) && !q.Member.Learner && q.Member.Reported {
				highest = max(highest, q.Member.AppliedIndex)
				if q.Role == RoleLeader {
					leaderIndex = max(leaderIndex, q.Member.AppliedIndex)
				}
			}
		}
		reference := leaderIndex
		if reference == 0 {
			reference = highest
		}
		if o.Policy.CatchUp && reference > 0 {
			for _, q := range o.Pods {
				if slices.ContainsFunc(taken, func(t PodState) bool { return t.Name == q.Name }) ||
					!inRange(q) || !q.Participating || q.Terminating || q.Member.Learner {
					continue
				}
				if !q.Member.Reported || q.Member.AppliedIndex == 0 {
					if q.Role != RoleLeader {
						return fail("took %s while %s (%s) left without an applied index", names(taken), q.Name, q.Role)
					}
					continue
				}
				if q.Member.AppliedIndex+o.Policy.MaxAppliedIndexLag < reference {
					return fail("took %s while %s lags %d entries behind the reference %d (bound %d)",
						names(taken), q.Name, reference-q.Member.AppliedIndex, reference, o.Policy.MaxAppliedIndexLag)
				}
			}
		}
		// The leader goes alone and last.
		for _, t := range taken {
			if t.Role != RoleLeader {
				continue
			}
			if len(taken) > 1 {
				return fail("leader %s in a batch", t.Name)
			}
			for _, q := range o.Pods {
				// (Two pods claiming leadership never come out of role resolution; the generator
				// makes them anyway, and either may go first.)
				if q.Name != t.Name && q.Role != RoleLeader && IsOutdated(q, o.UpdateRevision) && q.Participating && !q.Terminating && inRange(q) {
					return fail("took leader %s before %s", t.Name, q.Name)
				}
			}
		}
		return nil
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
		if len(d.Pods) != 0 || d.HandoverTo != "" {
			return fail("wait decision names pods")
		}
	case ActionDelete:
		if len(d.Pods) == 0 {
			return fail("delete decision without a pod")
		}
		if len(d.Pods) > max(o.Policy.MaxConcurrent, 1) {
			return fail("deletes %d pods, concurrency %d", len(d.Pods), o.Policy.MaxConcurrent)
		}
		if d.Rule == RuleSingleNode {
			// DEP-07's one exception: a single member has no quorum to keep and no one to
			// hand leadership to.
			if o.StatefulSetReplicas != 1 || len(o.Pods) != 1 || len(d.Pods) != 1 || d.Pods[0] != o.Pods[0].Name || !IsOutdated(o.Pods[0], o.UpdateRevision) || o.Pods[0].Terminating {
				return fail("single-node rule outside a single-node cluster")
			}
			return nil
		}
		var taken []PodState
		for i, name := range d.Pods {
			p, ok := byName(name)
			if !ok {
				return fail("deleted pod %s does not exist", name)
			}
			if slices.Contains(d.Pods[:i], name) {
				return fail("pod %s named twice", name)
			}
			if !IsOutdated(p, o.UpdateRevision) || p.Terminating || o.UpdateRevision == "" || !inRange(p) {
				return fail("deleted pod %s is up to date, terminating or out of range", p.Name)
			}
			if p.Participating {
				taken = append(taken, p)
			} else if len(d.Pods) > 1 {
				return fail("non-participating %s in a batch", p.Name)
			}
			if len(d.Pods) > 1 && p.Role != RoleFollower {
				return fail("%s (%s) in a batch of %d", p.Name, p.Role, len(d.Pods))
			}
			if p.Participating && p.Role == RoleLeader && o.Policy.Handover {
				switch d.Rule {
				case RuleLeaderHandoverFailed:
					if p.HandoverFailures < max(o.Policy.HandoverAttempts, 1) {
						return fail("gave up the handover after %d of %d attempts", p.HandoverFailures, o.Policy.HandoverAttempts)
					}
				case RuleLeaderNoTransferee:
					if _, ok := bestTransferee(o, p.HandoverFailedTo); ok && p.Member.Reported {
						return fail("deleted leader %s without a handover although a transferee exists", p.Name)
					}
				default:
					return fail("deleted leader %s by %s with handover on", p.Name, d.Rule)
				}
			}
		}
		if err := takesParticipating(taken); err != nil {
			return err
		}
		// A member a failed handover went to that did not serve a read holds every
		// participating deletion but its own (a handover may go on: it takes no member out).
		for _, q := range o.Pods {
			if len(taken) > 0 && q.Unheard && !q.Terminating && inRange(q) && !slices.ContainsFunc(taken, func(t PodState) bool { return t.Name == q.Name }) {
				return fail("deleted participating %s while %s, a failed handover's target, is unheard", names(taken), q.Name)
			}
		}
	case ActionHandover:
		if !o.Policy.Handover || len(d.Pods) != 1 {
			return fail("handover without the policy or not from exactly one pod")
		}
		l, ok := byName(d.Pods[0])
		if !ok || l.Role != RoleLeader || !l.Participating || l.Terminating || !inRange(l) || !IsOutdated(l, o.UpdateRevision) || !l.Member.Reported {
			return fail("handover from %s, which is not the outdated, participating, answering leader", d.Pods[0])
		}
		if l.HandoverFailures >= max(o.Policy.HandoverAttempts, 1) {
			return fail("handover attempted again after %d failures", l.HandoverFailures)
		}
		best, ok := bestTransferee(o, l.HandoverFailedTo)
		if !ok || best.Name != d.HandoverTo {
			return fail("handover to %q, the best transferee is %q (failed before: %v)", d.HandoverTo, best.Name, l.HandoverFailedTo)
		}
		if err := takesParticipating([]PodState{l}); err != nil {
			return err
		}
	default:
		return fail("unknown action %q", d.Action)
	}
	return nil
}

// bestTransferee is the updated, participating, answering voter with the highest applied index
// (ties: lowest ordinal) that is not among failedTo, or, when every one is, the best of all:
// computed apart from the planner's own choice.
func bestTransferee(o Observed, failedTo []string) (PodState, bool) {
	var best, bestFailed PodState
	found, foundFailed := false, false
	better := func(p, than PodState) bool {
		return p.Member.AppliedIndex > than.Member.AppliedIndex ||
			(p.Member.AppliedIndex == than.Member.AppliedIndex && p.Ordinal < than.Ordinal)
	}
	for _, p := range o.Pods {
		if IsOutdated(p, o.UpdateRevision) || p.Ordinal < 0 || p.Ordinal >= o.StatefulSetReplicas || !p.Participating || p.Terminating ||
			!p.Member.Reported || p.Member.Learner || p.Unheard {
			continue
		}
		if slices.Contains(failedTo, p.Name) {
			if !foundFailed || better(p, bestFailed) {
				bestFailed, foundFailed = p, true
			}
		} else if !found || better(p, best) {
			best, found = p, true
		}
	}
	if !found {
		return bestFailed, foundFailed
	}
	return best, true
}

func reversed(pods []PodState) []PodState {
	out := slices.Clone(pods)
	slices.Reverse(out)
	return out
}

// settledFromBytes explores the states the participating rules decide on, which
// observedFromBytes seldom reaches: clusters of 2–9 voters, nearly every pod present,
// running and ready, one leader (now and then none or two), applied indexes around the
// catch-up bounds, learners, failed handovers and every policy.
func settledFromBytes(data []byte) Observed {
	next := byteSource(data)
	o := Observed{StatefulSetReplicas: []int{3, 5, 7, 9, 2, 4, 1, 5}[int(next())%8], UpdateRevision: newRev, Policy: policyFromByte(next())}
	leader := int(next()) % (o.StatefulSetReplicas + 1)
	for ordinal := 0; ordinal < o.StatefulSetReplicas; ordinal++ {
		b, c := next(), next()
		if b%32 == 0 {
			continue // missing
		}
		p := PodState{
			Name: fmt.Sprintf("etcd-main-%d", ordinal), Ordinal: ordinal,
			Revision: []string{newRev, oldRev, oldRev}[int(b>>1)%3], Terminating: b%32 == 1,
			Container: ContainerAlive, Participating: b%16 != 2, Role: RoleFollower,
		}
		if ordinal == leader || c%64 == 1 {
			p.Role = RoleLeader
		} else if c%16 == 2 {
			p.Role = RoleUnknown
		}
		p.Member, p.HandoverFailures = memberFromByte(c | 1)
		p.HandoverFailedTo = failedTargetsFromByte(p.HandoverFailures, next())
		if b%64 == 3 {
			p.Member = MemberStatus{}
		}
		o.Pods = append(o.Pods, p)
	}
	// Now and then the backup gate holds, from bits of the first byte the size does not use.
	if len(data) > 0 && data[0]&0x30 == 0x10 {
		o.Backup = backupgate.Gate{Holds: true, Reason: "UploadFailed"}
	}
	return o
}

// TestPlanInvariantsRandom runs the invariants over seeded random states in every `go test`.
func TestPlanInvariantsRandom(t *testing.T) {
	forRandomBytes(rand.New(rand.NewPCG(7, 2026)), 20000, func(buf []byte) {
		checkPlanInvariants(t, observedFromBytes(buf))
		checkPlanInvariants(t, settledFromBytes(buf))
	})
}

// forRandomBytes calls f n times with 36 bytes drawn from r, enough for any generated state.
func forRandomBytes(r *rand.Rand, n int, f func(buf []byte)) {
	buf := make([]byte, 36)
	for range n {
		for j := range buf {
			buf[j] = byte(r.UintN(256))
		}
		f(buf)
	}
}

// TestRejoinProvenOnlyAddsUpdatedRunningMembers: whatever members claim to have served a read,
// WithRejoinProven only turns updated, running, in-range pods that are not terminating into
// participating ones, never takes participation away, changes nothing with the policy off or
// nothing left to replace, and the plan on the result keeps every invariant.
func TestRejoinProvenOnlyAddsUpdatedRunningMembers(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 2026))
	forRandomBytes(r, 20000, func(buf []byte) {
		o := observedFromBytes(buf)
		o.Policy.RejoinByRead = r.UintN(4) != 0
		var served []string
		for _, p := range o.Pods {
			if r.UintN(2) == 0 {
				served = append(served, p.Name)
			}
		}
		got := o.WithRejoinProven(served)
		outdatedLeft := slices.ContainsFunc(o.Pods, func(p PodState) bool { return IsOutdated(p, o.UpdateRevision) })
		for k, before := range o.Pods {
			after := got.Pods[k]
			eligible := o.Policy.RejoinByRead && o.UpdateRevision != "" && outdatedLeft && !IsOutdated(before, o.UpdateRevision) &&
				before.Ordinal >= 0 && before.Ordinal < o.StatefulSetReplicas && !before.Terminating && before.Container == ContainerAlive &&
				!before.Participating && !before.Member.Learner && slices.Contains(served, before.Name)
			if after.Participating != (before.Participating || eligible) || after.RejoinProven != eligible {
				t.Fatalf("pod %+v became %+v (served %v, policy %+v, update revision %q)", before, after, served, o.Policy, o.UpdateRevision)
			}
			if eligible != slices.Contains(AwaitingRejoin(o), before.Name) && slices.Contains(served, before.Name) {
				t.Fatalf("AwaitingRejoin(%+v) and WithRejoinProven disagree on %s", o, before.Name)
			}
		}
		checkPlanInvariants(t, got)
	})
}

// TestUnheardOnlyMarksHandoverSuspects: whatever members fail their read, WithUnheard marks
// only the ready, in-range, not terminating voters some pod's failed handover went to
// (HandoverSuspects), never changes participation, and the plan on the result keeps every
// invariant, among them that no participating deletion passes an unheard member.
func TestUnheardOnlyMarksHandoverSuspects(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 2026))
	forRandomBytes(r, 20000, func(buf []byte) {
		// Settled states too: only there does a participating deletion come up at all.
		for _, o := range []Observed{observedFromBytes(buf), settledFromBytes(buf)} {
			var failed []string
			for _, p := range o.Pods {
				if r.UintN(2) == 0 {
					failed = append(failed, p.Name)
				}
			}
			got := o.WithUnheard(failed)
			suspects := HandoverSuspects(o)
			for k, before := range o.Pods {
				after := got.Pods[k]
				named := slices.ContainsFunc(o.Pods, func(q PodState) bool { return slices.Contains(q.HandoverFailedTo, before.Name) })
				suspect := named && before.Participating && !before.Terminating && !before.Member.Learner && before.Ordinal >= 0 && before.Ordinal < o.StatefulSetReplicas
				if suspect != slices.Contains(suspects, before.Name) {
					t.Fatalf("HandoverSuspects(%+v) = %v, disagrees on %s", o, suspects, before.Name)
				}
				if after.Unheard != (suspect && slices.Contains(failed, before.Name)) || after.Participating != before.Participating {
					t.Fatalf("pod %+v became %+v (failed reads %v)", before, after, failed)
				}
			}
			checkPlanInvariants(t, got)
		}
	})
}

func FuzzPlan(f *testing.F) {
	f.Add([]byte{3, 1, 5, 2, 6, 10, 7, 2})
	f.Add([]byte{1, 1, 5, 16})
	f.Add([]byte{5, 1, 0xc5, 0, 5, 18, 6, 20, 7, 0, 1, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkPlanInvariants(t, observedFromBytes(data))
		checkPlanInvariants(t, settledFromBytes(data))
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
	// A batch as large as the concurrency asks, ignoring the headroom: 3 of 5 voters.
	greedy := func(o Observed) Decision {
		return planWith([]rule{func(v *view) verdict {
			var batch []string
			for _, p := range v.pods {
				if p.Participating && IsOutdated(p, v.o.UpdateRevision) && p.Role == RoleFollower && len(batch) < v.o.Policy.MaxConcurrent {
					batch = append(batch, p.Name)
				}
			}
			return deletePods(RuleParticipatingFollower, batch, "greedy")
		}}, o)
	}
	five := observed(5, pod("etcd-main-0").outdated(), pod("etcd-main-1").outdated(), pod("etcd-main-2").outdated(), pod("etcd-main-3").leader(), pod("etcd-main-4"))
	five.Policy = Policy{MaxConcurrent: 3}
	if planInvariantViolation(greedy, five) == nil {
		t.Fatal("invariant checker accepted taking 3 of 5 voters at once")
	}
	// A participating member replaced while the backup is not ready.
	backupDown := observed(3, pod("etcd-main-0").outdated(), pod("etcd-main-1").outdated(), pod("etcd-main-2").leader())
	backupDown.Backup = backupgate.Gate{Holds: true}
	if planInvariantViolation(func(o Observed) Decision { return planWith([]rule{ruleReplaceParticipating}, o) }, backupDown) == nil {
		t.Fatal("invariant checker accepted replacing a participating member while BackupReady is False")
	}
	// A lagging voter left behind.
	lagging := observed(3, pod("etcd-main-0").outdated().reported(100000).leader(), pod("etcd-main-1").outdated().reported(100000), pod("etcd-main-2").reported(1))
	lagging.Policy = Policy{CatchUp: true, MaxAppliedIndexLag: 1000}
	if planInvariantViolation(func(o Observed) Decision { return planWith([]rule{ruleReplaceParticipating}, o) }, lagging) == nil {
		t.Fatal("invariant checker accepted deleting etcd-main-1 while etcd-main-2 lags 99999 entries")
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
