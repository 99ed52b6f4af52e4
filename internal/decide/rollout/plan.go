package rollout

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
)

// verdict is one rule's answer. The zero value passes: the rule has nothing to say and the
// next one is asked.
type verdict struct {
	action     Action
	pods       []string
	handoverTo string
	rule       RuleID
	reason     string
	waitingFor []string
}

func (v verdict) passes() bool { return v.action == "" }

// rule looks at the precomputed view and either passes or decides.
type rule func(v *view) verdict

// rules run in this order; the first verdict that does not pass wins. The order is DEP-07's
// procedure: done check, then non-participating pods, then the wait conditions that protect
// quorum, then one participating pod.
var rules = []rule{
	ruleWithinBounds,
	ruleUpdateRevisionKnown,
	ruleAllUpToDate,
	ruleNoOtherOperation,
	ruleBackupReady,
	ruleSingleNode,
	ruleNonParticipatingFirst,
	ruleNoPodTerminating,
	ruleNoPodMissing,
	ruleUpdatedMustParticipate,
	ruleNoScaleDownInFlight,
	ruleQuorumHeadroom,
	ruleCatchUp,
	ruleHandoverTargetsHeard,
	ruleReplaceParticipating,
}

// Plan decides what the OnDelete controller does next for one observation. It never deletes a
// terminating or up-to-date pod, and more than one pod only within the quorum's headroom when
// o.Policy allows concurrency.
func Plan(o Observed) Decision { return planWith(rules, o) }

func planWith(rules []rule, o Observed) Decision {
	v := newView(o)
	for _, r := range rules {
		if got := r(v); !got.passes() {
			return got.decision()
		}
	}
	return verdict{
		action: ActionWait,
		rule:   RuleNoCandidate,
		reason: fmt.Sprintf("no rule could pick a pod although the rollout is not done; %s", v.summary()),
	}.decision()
}

func (v verdict) decision() Decision {
	d := Decision{Action: v.action, Rule: v.rule, Reason: v.reason, WaitingFor: v.waitingFor}
	if v.action == ActionDelete || v.action == ActionHandover {
		d.Pods = v.pods
		d.HandoverTo = v.handoverTo
	}
	return d
}

// view holds what every rule needs, computed once per Plan.
type view struct {
	o    Observed
	pods []PodState // by ordinal, then name

	outdated    int
	terminating []PodState
	missing     []string
	// updatedNotParticipating are updated pods, in range and not terminating, whose etcd
	// container is not Ready.
	updatedNotParticipating []PodState
	// condemned pods lie outside [0, replicas): a scale-down will remove them.
	condemned     []PodState
	participating int
	// participatingVoters counts the participating pods that vote: in range, not terminating, not
	// learners. Whether they are a quorum is what a volume move may cost (ruleNonParticipatingFirst).
	participatingVoters int
	// rejoinProven names the participating pods known so by their own read (RejoinProven).
	rejoinProven []string
	// unheard are the pods a failed handover went to that did not serve a read (Unheard).
	unheard []string
	// unavailable counts the voters (ordinals in range) that are missing, terminating, not
	// participating or learners: each uses up part of the quorum's headroom.
	unavailable      int
	unavailableNames []string
	// choice caches what step 4 would take (choose).
	choice *participatingChoice
	// outOfBounds says why the observation is too large to plan on; the view is then left empty.
	outOfBounds string
}

func newView(o Observed) *view {
	// Checked before anything is sized by Replicas: the loop over missing ordinals below would
	// otherwise run (and allocate) as far as a hostile or corrupt count asks.
	if why := outOfBounds(o); why != "" {
		return &view{o: o, outOfBounds: why}
	}
	v := &view{o: o, pods: append([]PodState(nil), o.Pods...)}
	sortPods(v.pods)
	present := make(map[int]bool, len(v.pods))
	for _, p := range v.pods {
		present[p.Ordinal] = true
		if IsOutdated(p, o.UpdateRevision) {
			v.outdated++
		}
		if v.inRange(p) && (p.Terminating || !p.Participating || p.Member.Learner) {
			v.unavailable++
			v.unavailableNames = append(v.unavailableNames, p.Name)
		}
		if p.Terminating {
			v.terminating = append(v.terminating, p)
			continue
		}
		if p.Participating {
			v.participating++
			if v.inRange(p) && !p.Member.Learner {
				v.participatingVoters++
			}
		}
		if p.RejoinProven {
			v.rejoinProven = append(v.rejoinProven, p.Name)
		}
		if p.Unheard {
			v.unheard = append(v.unheard, p.Name)
		}
		if !v.inRange(p) {
			v.condemned = append(v.condemned, p)
			continue
		}
		if !IsOutdated(p, o.UpdateRevision) && !p.Participating {
			v.updatedNotParticipating = append(v.updatedNotParticipating, p)
		}
	}
	base := baseName(v.pods)
	for i := 0; i < o.StatefulSetReplicas; i++ {
		if !present[i] {
			v.missing = append(v.missing, memberName(base, i))
		}
	}
	v.unavailable += len(v.missing)
	v.unavailableNames = append(v.unavailableNames, v.missing...)
	return v
}

// outOfBounds describes the first way o exceeds what the planner accepts, or returns "".
func outOfBounds(o Observed) string {
	switch {
	case o.StatefulSetReplicas < 0 || o.StatefulSetReplicas > MaxMembers:
		return fmt.Sprintf("the StatefulSet asks for %d replicas; at most %d members are supported", o.StatefulSetReplicas, MaxMembers)
	case len(o.Pods) > MaxMembers:
		return fmt.Sprintf("%d member pods observed; at most %d members are supported", len(o.Pods), MaxMembers)
	}
	for _, p := range o.Pods {
		if p.Ordinal >= MaxMembers {
			return fmt.Sprintf("pod %s has ordinal %d; with at most %d members the last ordinal is %d",
				p.Name, p.Ordinal, MaxMembers, MaxMembers-1)
		}
	}
	return ""
}

func (v *view) inRange(p PodState) bool { return p.Ordinal >= 0 && p.Ordinal < v.o.StatefulSetReplicas }

// candidate is an outdated pod the planner may delete.
func (v *view) candidate(p PodState) bool {
	return IsOutdated(p, v.o.UpdateRevision) && !p.Terminating && v.inRange(p)
}

func (v *view) summary() string {
	s := fmt.Sprintf("%d/%d participating, %d outdated", v.participating, v.o.StatefulSetReplicas, v.outdated)
	if len(v.rejoinProven) > 0 {
		s += fmt.Sprintf(" (%s served a linearizable read before its readiness probe passed)", strings.Join(v.rejoinProven, ", "))
	}
	return s
}

// baseName recovers the StatefulSet name from a pod name, so a missing pod can be named.
func baseName(pods []PodState) string {
	for _, p := range pods {
		if p.Ordinal < 0 {
			continue
		}
		if base, ok := strings.CutSuffix(p.Name, "-"+strconv.Itoa(p.Ordinal)); ok && base != "" {
			return base
		}
	}
	return ""
}

func memberName(base string, ordinal int) string {
	if base == "" {
		return fmt.Sprintf("ordinal %d", ordinal)
	}
	return fmt.Sprintf("%s-%d", base, ordinal)
}

func names(pods []PodState) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func wait(rule RuleID, waitingFor []string, format string, args ...any) verdict {
	return verdict{action: ActionWait, rule: rule, reason: fmt.Sprintf(format, args...), waitingFor: waitingFor}
}

func deletePod(rule RuleID, pod string, format string, args ...any) verdict {
	return deletePods(rule, []string{pod}, format, args...)
}

func deletePods(rule RuleID, pods []string, format string, args ...any) verdict {
	return verdict{action: ActionDelete, pods: pods, rule: rule, reason: fmt.Sprintf(format, args...)}
}

// quorum is the number of voters that must stay participating; headroom how many may not.
func (v *view) quorum() int   { return quorum.Of(v.o.StatefulSetReplicas) }
func (v *view) headroom() int { return quorum.Headroom(v.o.StatefulSetReplicas) }

// concurrent says whether the policy allows replacing several participating members at once.
func (v *view) concurrent() bool { return v.o.Policy.MaxConcurrent > 1 }

// budget is how many more participating members may be taken away now: the configured
// concurrency (one without it) capped by the headroom, less what is already unavailable.
func (v *view) budget() int {
	limit := 1
	if v.concurrent() {
		limit = v.o.Policy.MaxConcurrent
	}
	return min(limit, v.headroom()) - v.unavailable
}

// holdsForBudget tells a DEP-07 step 3 wait rule whether to wait: always without concurrency
// (DEP-07 as written), and with it only once the unavailable voters use up the budget.
// A terminating pod beyond the range (a scale-down) or nothing participating left to take
// makes them wait as well: there is nothing else to do.
func (v *view) holdsForBudget() bool {
	if !v.concurrent() || v.budget() <= 0 || len(v.choose().pods) == 0 {
		return true
	}
	for _, p := range v.terminating {
		if !v.inRange(p) {
			return true
		}
	}
	return false
}
