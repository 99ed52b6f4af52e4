package rollout

import (
	"fmt"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
)

// ruleWithinBounds refuses to plan on an observation larger than any cluster the operator
// runs: it deletes nothing and says which number is out of range.
func ruleWithinBounds(v *view) verdict {
	if v.outOfBounds == "" {
		return verdict{}
	}
	return wait(RuleOutOfBounds, nil, "refusing to plan: %s", v.outOfBounds)
}

// ruleUpdateRevisionKnown: without status.updateRevision no pod can be called outdated, and
// guessing could delete an up-to-date member.
func ruleUpdateRevisionKnown(v *view) verdict {
	if v.o.UpdateRevision != "" {
		return verdict{}
	}
	return wait(RuleNoUpdateRevision, nil, "the StatefulSet has no status.updateRevision yet; %d pods observed", len(v.pods))
}

// ruleAllUpToDate is DEP-07 step 1: nothing to roll once every pod carries the update revision
// and the set is complete and settled.
func ruleAllUpToDate(v *view) verdict {
	if v.outdated > 0 || len(v.terminating) > 0 || len(v.missing) > 0 {
		return verdict{}
	}
	return verdict{
		action: ActionDone, rule: RuleDone,
		reason: fmt.Sprintf("all %d pods run revision %s; %d/%d participating", len(v.pods), v.o.UpdateRevision, v.participating, v.o.StatefulSetReplicas),
	}
}

// ruleNoOtherOperation: one operation at a time. While a membership change, a recovery, a
// defragmentation or the hand-over to RollingUpdate is in flight, no pod goes, not even a
// non-participating one: the other operation counts members too, and a pod taken away under it
// could cost the quorum twice.
func ruleNoOtherOperation(v *view) verdict {
	if len(v.o.Operations) == 0 {
		return verdict{}
	}
	return wait(operation.WaitRule(Planner, v.o.Operations[0].Kind), nil, "waiting for the %s to finish before replacing pods; %s",
		v.o.Operations.Describe(), v.summary())
}

// HeldByOperation is ruleNoOtherOperation and ruleBackupReady alone: the controller asks them
// again, on the Etcd read afresh, right before it deletes, and reports a hold under the same
// rule id.
func HeldByOperation(o Observed) (Decision, bool) {
	v := newView(o)
	for _, r := range []rule{ruleNoOtherOperation, ruleBackupReady} {
		if got := r(v); !got.passes() {
			return got.decision(), true
		}
	}
	return Decision{}, false
}

// ruleBackupReady is DEP-01's "postpone potentially disruptive maintenance operations when the
// BackupReady condition is false" (rolling updates): while the backup gate holds, no
// participating member is replaced and no leadership moved. An outdated member that does not
// participate passes: replacing it costs the quorum nothing and brings the cluster back to
// health (ruleSingleNode or ruleNonParticipatingFirst takes it next).
func ruleBackupReady(v *view) verdict {
	if !v.o.Backup.Holds {
		return verdict{}
	}
	for _, p := range v.pods {
		if v.candidate(p) && !p.Participating {
			return verdict{}
		}
	}
	return wait(RuleBackupNotReady, nil, "%s; %s", v.o.Backup.Waiting("replacing the next member"), v.summary())
}

// ruleSingleNode: a one-member cluster has no quorum to keep and no leader election to avoid,
// so its only pod is replaced whatever its health (DEP-07 "Single-Node Clusters"). The wait
// afterwards comes from the step 3 rules.
func ruleSingleNode(v *view) verdict {
	if v.o.StatefulSetReplicas != 1 || len(v.pods) != 1 {
		return verdict{}
	}
	p := v.pods[0]
	if !v.candidate(p) {
		return verdict{}
	}
	return deletePod(RuleSingleNode, p.Name, "deleting %s: single-node cluster and its only pod runs revision %s, not %s",
		p.Name, revisionOrNone(p.Revision), v.o.UpdateRevision)
}

// ruleNonParticipatingFirst is DEP-07 step 2: an outdated member that is not in the quorum can
// be replaced at no quorum cost, even while other such pods are still being replaced.
//
// Not so for a pod that comes back on a new, empty volume (NewVolume) while the participating
// voters are no quorum: its member may hold what the quorum needs (a member killed or cut off for
// a moment, with its data), and deleting it would move that data out of the cluster's reach, then
// the next one's, until no member holds any (wait/new-volume-no-quorum).
func ruleNonParticipatingFirst(v *view) verdict {
	var candidates, kept []PodState
	quorate := v.participatingVoters >= v.quorum()
	for _, p := range v.pods {
		switch {
		case !v.candidate(p) || p.Participating:
		case p.NewVolume && !quorate:
			kept = append(kept, p)
		default:
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		if len(kept) > 0 {
			n := names(kept)
			return wait(RuleNewVolumeNoQuorum, n, "not deleting %s: outdated and not participating, but each would come back on a new, empty volume "+
				"and %d participating voters are no quorum (%d): their data may be what brings the quorum back; %s",
				strings.Join(n, ", "), v.participatingVoters, v.quorum(), v.summary())
		}
		return verdict{}
	}
	p := rankNonParticipating(candidates)[0]
	return deletePod(nonParticipatingRule(p.Container), p.Name,
		"deleting %s: outdated and not participating, etcd container %s; %d outdated non-participating, %s",
		p.Name, describeClass(p.Container), len(candidates), v.summary())
}

func nonParticipatingRule(c ContainerClass) RuleID {
	switch c {
	case ContainerDead:
		return RuleNonParticipatingDead
	case ContainerTransient:
		return RuleNonParticipatingTransient
	case ContainerAlive:
		return RuleNonParticipatingAlive
	default:
		return RuleNonParticipatingUnknown
	}
}

func describeClass(c ContainerClass) string {
	switch c {
	case ContainerDead:
		return "dead"
	case ContainerTransient:
		return "still starting"
	case ContainerAlive:
		return "running but not ready"
	default:
		return "in an unknown state"
	}
}

// ruleNoPodTerminating (step 3): a pod on its way out is already a member short; removing a
// participating one on top could cost the quorum. With concurrency the step 3 rules hold only
// once the quorum's headroom is used up (view.holdsForBudget).
func ruleNoPodTerminating(v *view) verdict {
	if len(v.terminating) == 0 || !v.holdsForBudget() {
		return verdict{}
	}
	n := names(v.terminating)
	return wait(RulePodTerminating, n, "waiting for %s to finish terminating; %s", strings.Join(n, ", "), v.summary())
}

// ruleNoPodMissing (step 3): a deleted pod the StatefulSet controller has not recreated yet is
// not participating either.
func ruleNoPodMissing(v *view) verdict {
	if len(v.missing) == 0 || !v.holdsForBudget() {
		return verdict{}
	}
	return wait(RulePodMissing, v.missing, "waiting for the StatefulSet controller to create %s; %s",
		strings.Join(v.missing, ", "), v.summary())
}

// ruleUpdatedMustParticipate is DEP-07 step 3 proper: the previously replaced member has to be
// back in the quorum before the next participating member goes.
func ruleUpdatedMustParticipate(v *view) verdict {
	if len(v.updatedNotParticipating) == 0 || !v.holdsForBudget() {
		return verdict{}
	}
	n := names(v.updatedNotParticipating)
	return wait(RuleUpdatedNotParticipating, n, "waiting for %s (updated) to rejoin the quorum; %s",
		strings.Join(n, ", "), v.summary())
}

// ruleNoScaleDownInFlight: pods beyond spec.replicas are still members until the scale-down
// removes them; replacing a participating member meanwhile would shrink the quorum twice.
func ruleNoScaleDownInFlight(v *view) verdict {
	if len(v.condemned) == 0 {
		return verdict{}
	}
	n := names(v.condemned)
	return wait(RuleScaleDown, n, "waiting for the scale-down to %d replicas to remove %s; %s",
		v.o.StatefulSetReplicas, strings.Join(n, ", "), v.summary())
}

func participatingRule(r Role) RuleID {
	switch r {
	case RoleFollower:
		return RuleParticipatingFollower
	case RoleLeader:
		return RuleParticipatingLeader
	default:
		return RuleParticipatingUnknownRole
	}
}

func describeRole(r Role) string {
	switch r {
	case RoleFollower:
		return "follower"
	case RoleLeader:
		return "leader"
	default:
		return "role unknown"
	}
}

func revisionOrNone(rev string) string {
	if rev == "" {
		return "<none>"
	}
	return rev
}
