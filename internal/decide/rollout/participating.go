package rollout

import (
	"fmt"
	"slices"
	"strings"
)

// Step 4 beyond DEP-07: how many participating members go at once (quorum headroom), whether the
// voters that remain are caught up (catch-up gate), and how the leader goes (handover first).

// participatingChoice is what step 4 would take now: a batch of known followers within the
// budget, else one pod of unknown role (it may be the leader, so it goes alone), else the
// known leader alone.
type participatingChoice struct {
	pods   []PodState
	leader bool
}

// choose computes the choice once per Plan.
func (v *view) choose() participatingChoice {
	if v.choice != nil {
		return *v.choice
	}
	var candidates []PodState
	for _, p := range v.pods {
		if v.candidate(p) && p.Participating {
			candidates = append(candidates, p)
		}
	}
	c := participatingChoice{}
	if len(candidates) > 0 {
		ranked := v.rankParticipating(candidates)
		switch ranked[0].Role {
		case RoleFollower:
			n := max(v.budget(), 1)
			for _, p := range ranked {
				if p.Role != RoleFollower || len(c.pods) == n {
					break
				}
				c.pods = append(c.pods, p)
			}
		case RoleLeader:
			c = participatingChoice{pods: ranked[:1], leader: true}
		default:
			c.pods = ranked[:1]
		}
	}
	v.choice = &c
	return c
}

// rankParticipating orders candidates by role (followers, unknown, leader); among followers one
// that lags beyond the catch-up bound goes first (replacing it leaves the caught-up ones), then
// the lowest ordinal.
func (v *view) rankParticipating(pods []PodState) []PodState {
	ref, known := v.reference()
	return rankBy(pods, func(p PodState) int {
		r, ok := roleRank[p.Role]
		if !ok {
			r = roleRank[RoleUnknown]
		}
		r *= 2
		if !(known && p.Role == RoleFollower && v.lagsBehind(p, ref.index)) {
			r++
		}
		return r
	})
}

// catchUpReference is the applied index lag is measured against: the participating leader's
// when it answered, otherwise the highest a participating voter reported. That is a lower bound
// of the leader's, so a voter found lagging behind it lags the leader at least as much.
type catchUpReference struct {
	pod        string
	index      uint64
	fromLeader bool
}

func (r catchUpReference) String() string {
	if r.fromLeader {
		return fmt.Sprintf("leader %s's applied index %d", r.pod, r.index)
	}
	return fmt.Sprintf("applied index %d (%s's, the highest reported: the leader did not report one)", r.index, r.pod)
}

func (v *view) reference() (catchUpReference, bool) {
	if p, ok := v.reportingLeader(); ok && p.Member.AppliedIndex > 0 {
		return catchUpReference{pod: p.Name, index: p.Member.AppliedIndex, fromLeader: true}, true
	}
	var best catchUpReference
	for _, p := range v.pods {
		if v.inRange(p) && p.Participating && !p.Terminating && !p.Member.Learner && p.Member.Reported && p.Member.AppliedIndex > best.index {
			best = catchUpReference{pod: p.Name, index: p.Member.AppliedIndex}
		}
	}
	return best, best.index > 0
}

// reportingLeader is the participating leader that answered. Role resolution names at most
// one; should two claim it, the one with the higher applied index is the stricter reference.
func (v *view) reportingLeader() (PodState, bool) {
	var best PodState
	found := false
	for _, p := range v.pods {
		if p.Role == RoleLeader && p.Participating && !p.Terminating && v.inRange(p) && p.Member.Reported && !p.Member.Learner &&
			(!found || p.Member.AppliedIndex > best.Member.AppliedIndex) {
			best, found = p, true
		}
	}
	return best, found
}

// lag is how many entries p has applied fewer than the reference; unknown indexes count as 0
// here (ruleCatchUp waits for them on its own).
func lag(p PodState, leader uint64) uint64 {
	if p.Member.AppliedIndex == 0 || p.Member.AppliedIndex >= leader {
		return 0
	}
	return leader - p.Member.AppliedIndex
}

func (v *view) lagsBehind(p PodState, leader uint64) bool {
	return v.o.Policy.CatchUp && lag(p, leader) > v.o.Policy.MaxAppliedIndexLag
}

// remainingVoters are the participating voters left once the choice is gone.
func (v *view) remainingVoters(c participatingChoice) []PodState {
	taken := map[string]bool{}
	for _, p := range c.pods {
		taken[p.Name] = true
	}
	var out []PodState
	for _, p := range v.pods {
		if v.inRange(p) && p.Participating && !p.Terminating && !p.Member.Learner && !taken[p.Name] {
			out = append(out, p)
		}
	}
	return out
}

// ruleQuorumHeadroom: a participating member goes only while the voters already unavailable
// leave room under the quorum's headroom. Without concurrency the step 3 rules have already
// waited for the usual causes; this catches the rest (a learner, a cluster of two voters).
func ruleQuorumHeadroom(v *view) verdict {
	if len(v.choose().pods) == 0 || v.budget() > 0 {
		return verdict{}
	}
	return wait(RuleQuorumHeadroom, v.unavailableNames,
		"waiting: %d of %d voters unavailable (%s) and quorum %d leaves a headroom of %d, concurrency limit %d; %s",
		v.unavailable, v.o.StatefulSetReplicas, joinOrNone(v.unavailableNames), v.quorum(), v.headroom(), v.limit(), v.summary())
}

// ruleCatchUp: a participating member goes only if every voter that remains is within the
// bound of the leader's applied index, so the quorum left does not wait on a slow member. A
// follower that remains without an applied index (it did not answer Status) cannot be shown
// caught up, so it is waited for too; only when no member reported one is the gate unchecked
// (roles from leases), and the deletion's reason says so.
func ruleCatchUp(v *view) verdict {
	c := v.choose()
	if !v.o.Policy.CatchUp || len(c.pods) == 0 {
		return verdict{}
	}
	ref, known := v.reference()
	if !known {
		return verdict{}
	}
	var behind, detail []string
	for _, p := range v.remainingVoters(c) {
		switch {
		case (!p.Member.Reported || p.Member.AppliedIndex == 0) && p.Role == RoleLeader:
			// The leader is what the others catch up with: without its index there is nothing
			// to wait for. (Should two claim the lead, the one that reported is checked below.)
		case !p.Member.Reported || p.Member.AppliedIndex == 0:
			behind = append(behind, p.Name)
			detail = append(detail, p.Name+" (no applied index: it did not answer Status)")
		case v.lagsBehind(p, ref.index):
			behind = append(behind, p.Name)
			detail = append(detail, fmt.Sprintf("%s (%d entries behind, applied %d)", p.Name, lag(p, ref.index), p.Member.AppliedIndex))
		}
	}
	if len(behind) == 0 {
		return verdict{}
	}
	return wait(RuleCatchUp, behind,
		"waiting for %s to catch up with %s (bound %d entries) before deleting %s; %s",
		strings.Join(detail, ", "), ref, v.o.Policy.MaxAppliedIndexLag, strings.Join(names(c.pods), ", "), v.summary())
}

// ruleHandoverTargetsHeard: a member a failed handover went to may be cut off from the leader
// while its readiness probe has not failed yet (that takes two probe periods). Until it serves
// the controller a linearizable read, which only the leader can let through, no participating
// member is deleted: with it unheard, the voters left could be fewer than a quorum. A handover is
// let through: it moves no member out, and another member taking over absorbs the raised term
// the failed transferee's campaign left behind.
func ruleHandoverTargetsHeard(v *view) verdict {
	c := v.choose()
	deleted := names(c.pods)
	var unheard []string
	for _, name := range v.unheard {
		if !slices.Contains(deleted, name) { // deleting it takes no heard member away
			unheard = append(unheard, name)
		}
	}
	if len(unheard) == 0 || ruleReplaceParticipating(v).action != ActionDelete {
		return verdict{}
	}
	heard := 0
	for _, p := range v.pods {
		if v.inRange(p) && p.Participating && !p.Terminating && !p.Member.Learner && !p.Unheard && !slices.Contains(deleted, p.Name) {
			heard++
		}
	}
	return wait(RuleHandoverTargetUnheard, unheard,
		"waiting for %s: a handover to it failed and it did not serve a linearizable read now, so the leader may not hear it although it is ready; deleting %s would leave %d of %d voters known to be heard (quorum %d); %s",
		strings.Join(unheard, ", "), strings.Join(deleted, ", "), heard, v.o.StatefulSetReplicas, v.quorum(), v.summary())
}

// catchUpNote says, for a deletion's reason, what the catch-up gate saw.
func (v *view) catchUpNote(c participatingChoice) string {
	if !v.o.Policy.CatchUp {
		return ""
	}
	ref, known := v.reference()
	if !known {
		return "; catch-up unchecked: no member reported an applied index"
	}
	var largest uint64
	remaining := v.remainingVoters(c)
	for _, p := range remaining {
		largest = max(largest, lag(p, ref.index))
	}
	return fmt.Sprintf("; %d remaining voters within %d entries of %s (largest lag %d)",
		len(remaining), v.o.Policy.MaxAppliedIndexLag, ref, largest)
}

// ruleReplaceParticipating is DEP-07 step 4: every outdated pod participates now, so replace
// followers (one, or a batch within the headroom), else a pod of unknown role, and the leader
// last, after moving leadership to the best updated voter.
func ruleReplaceParticipating(v *view) verdict {
	c := v.choose()
	if len(c.pods) == 0 {
		return verdict{}
	}
	if c.leader {
		return v.replaceLeader(c)
	}
	p := c.pods[0]
	if len(c.pods) == 1 && !v.concurrent() {
		return deletePod(participatingRule(p.Role), p.Name, "deleting %s (%s, outdated): every updated pod participates; %s%s",
			p.Name, describeRole(p.Role), v.summary(), v.catchUpNote(c))
	}
	return deletePods(participatingRule(p.Role), names(c.pods),
		"deleting %s (%s, outdated): %d at once within the quorum's headroom (concurrency %d, %d voters, quorum %d, headroom %d, %d already unavailable); %s%s",
		strings.Join(names(c.pods), ", "), describeRoles(c.pods), len(c.pods), v.limit(), v.o.StatefulSetReplicas, v.quorum(), v.headroom(), v.unavailable,
		v.summary(), v.catchUpNote(c))
}

// limit is the configured number of participating members replaced at once, capped by headroom.
func (v *view) limit() int {
	if !v.concurrent() {
		return 1
	}
	return min(v.o.Policy.MaxConcurrent, v.headroom())
}

// replaceLeader hands leadership over first when it can, and deletes the leader when it cannot,
// saying why (etcd's own shutdown handover then applies).
func (v *view) replaceLeader(c participatingChoice) verdict {
	l := c.pods[0]
	note := v.catchUpNote(c)
	if !v.o.Policy.Handover {
		return deletePod(RuleParticipatingLeader, l.Name, "deleting %s (leader, outdated): every updated pod participates; %s%s",
			l.Name, v.summary(), note)
	}
	if !l.Member.Reported {
		return deletePod(RuleLeaderNoTransferee, l.Name,
			"deleting %s (leader, outdated) without a handover: it did not answer over mTLS (or was not asked: roles from leases), so it cannot be asked to move leadership; etcd hands over at shutdown; %s%s",
			l.Name, v.summary(), note)
	}
	target, considered, failedBefore, unheard, ok := v.transferee(l)
	if !ok {
		return deletePod(RuleLeaderNoTransferee, l.Name,
			"deleting %s (leader, outdated) without a handover: no updated, participating voter answered with its status (%d updated pods); etcd hands over at shutdown; %s%s",
			l.Name, v.updatedCount(), v.summary(), note)
	}
	attempts := max(v.o.Policy.HandoverAttempts, 1)
	if l.HandoverFailures >= attempts {
		return deletePod(RuleLeaderHandoverFailed, l.Name,
			"deleting %s (leader, outdated) after %d failed handovers (at most %d): relying on etcd's shutdown handover; %s%s",
			l.Name, l.HandoverFailures, attempts, v.summary(), note)
	}
	passedOver := ""
	switch {
	case slices.Contains(l.HandoverFailedTo, target.Name):
		passedOver = "; a handover to each of them failed before, so the best again"
	case len(failedBefore) > 0:
		passedOver = fmt.Sprintf("; not %s again, a handover to it failed", strings.Join(failedBefore, ", "))
	}
	if len(unheard) > 0 {
		passedOver += fmt.Sprintf("; not %s, which did not serve a read after a handover to it failed", strings.Join(unheard, ", "))
	}
	return verdict{action: ActionHandover, pods: []string{l.Name}, handoverTo: target.Name, rule: RuleHandover,
		reason: fmt.Sprintf("moving leadership from %s (outdated, applied index %d) to %s (updated, applied index %d, highest of %d updated voters%s) before deleting %s; attempt %d of %d; %s%s",
			l.Name, l.Member.AppliedIndex, target.Name, target.Member.AppliedIndex, considered, passedOver, l.Name, l.HandoverFailures+1, attempts, v.summary(), note)}
}

// transferee is the best pod to take over leadership from leader: an updated, participating
// voter that answered, with the highest applied index (ties: lowest ordinal). A member a
// handover from leader already failed to reach is passed over while another qualifies
// (failedBefore names those): the failure may be that member's link to the leader, and trying
// it again would fail the same way. An Unheard member is never taken (unheard names those).
// considered counts the pods that qualified.
func (v *view) transferee(leader PodState) (best PodState, considered int, failedBefore, unheard []string, ok bool) {
	var fallback PodState
	for _, p := range v.pods {
		if IsOutdated(p, v.o.UpdateRevision) || !v.inRange(p) || !p.Participating || p.Terminating || !p.Member.Reported || p.Member.Learner {
			continue
		}
		if p.Unheard {
			unheard = append(unheard, p.Name)
			continue
		}
		considered++
		if slices.Contains(leader.HandoverFailedTo, p.Name) {
			failedBefore = append(failedBefore, p.Name)
			if fallback.Name == "" || p.Member.AppliedIndex > fallback.Member.AppliedIndex {
				fallback = p
			}
			continue
		}
		if !ok || p.Member.AppliedIndex > best.Member.AppliedIndex {
			best, ok = p, true
		}
	}
	if !ok && fallback.Name != "" {
		// A handover to every qualifying member failed: the best of them again.
		return fallback, considered, failedBefore, unheard, true
	}
	return best, considered, failedBefore, unheard, ok
}

func (v *view) updatedCount() int {
	n := 0
	for _, p := range v.pods {
		if !IsOutdated(p, v.o.UpdateRevision) {
			n++
		}
	}
	return n
}

func describeRoles(pods []PodState) string {
	if len(pods) == 1 {
		return describeRole(pods[0].Role)
	}
	return describeRole(pods[0].Role) + "s"
}

func joinOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
