// Package volumechange decides how an Etcd's members move to the volumes its spec asks for when
// spec.storageClass or spec.storageCapacity changes. A StatefulSet's volume claim templates cannot
// change, so the StatefulSet is deleted without its pods (orphaned) and created again with a claim
// template of a new name: the pods, now outdated, are replaced one at a time by the rollout, the
// leader last, and each comes back on a new, empty claim and joins the others as a learner that is
// promoted once it caught up. The old claims, and the data on them, are left where they are.
//
// That is only safe while the other members hold the data and a quorum: the change waits until
// every member is ready, and is refused for fewer than three members (the one member replaced
// would be the only one, and would start empty: a backup and restore is the way there). Before the
// StatefulSet is created again, leadership goes to the highest ordinal, so the members move in
// ordinal order, which the StatefulSet controller needs (see RuleLeaderLast).
//
// The claim template's name is what binds pods to volumes, so it is never guessed: a StatefulSet
// that is missing while member pods still run (deleted in the middle of a change, or by someone
// else) is created with the claim template the pods mount.
//
// Pure: Plan is a function of what it is given, one named rule per answer.
package volumechange

import (
	"fmt"

	"github.com/etcd-conductor/etcd-conductor/internal/ruleid"
)

// Rule ids.
const (
	RuleNew      ruleid.ID = "volume/new"
	RuleAdopt    ruleid.ID = "volume/claims-of-running-pods"
	RuleSteady   ruleid.ID = "volume/steady"
	RuleRecreate ruleid.ID = "volume/recreate-statefulset"
	// RuleWaitReady: the change waits until every member is ready.
	RuleWaitReady ruleid.ID = "volume/wait-members-ready"
	// RuleRefuseFew: fewer than three members; no other member would hold the data.
	RuleRefuseFew ruleid.ID = "volume/refuse-fewer-than-three-members"
	// RuleLeaderLast: leadership goes to the highest ordinal before the StatefulSet is created again.
	RuleLeaderLast ruleid.ID = "volume/move-leader-to-last-ordinal"
	// RuleWaitLeader: no member answered as the leader.
	RuleWaitLeader ruleid.ID = "volume/wait-leader"
)

// MinMembers is the smallest cluster whose members are moved to new volumes one at a time.
const MinMembers = 3

// Claims is a data volume claim template: its name and what it asks for.
type Claims struct {
	Name     string
	Class    string
	Capacity string
}

// Observed is what the decision needs.
type Observed struct {
	// Running is the StatefulSet's claim template; nil when there is no StatefulSet.
	Running *Claims
	// PodClaims is the claim template the member pods mount ("" when no pod runs), read when there
	// is no StatefulSet.
	PodClaims string
	// Desired is what the spec asks for; Desired.Name is the name a change moves to.
	Desired Claims
	// DefaultName is the claim template name of a new Etcd.
	DefaultName string
	// Replicas is spec.replicas; Ready tells whether every member is ready.
	Replicas int
	Ready    bool
	// LeaderOrdinal is the ordinal of the leader's pod, -1 when no member said; asked only once the
	// change can be made.
	LeaderOrdinal int
}

// Decision is the claim template to render and whether the StatefulSet is to be created again.
type Decision struct {
	// Name is the claim template name to render.
	Name string
	// Recreate: delete the StatefulSet without its pods and create it with Name.
	Recreate bool
	// MoveLeaderTo is the ordinal whose member is to lead first (-1: none).
	MoveLeaderTo int
	Rule         ruleid.ID
	Reason       string
	// Refused: the change cannot be made; Name keeps what runs and Reason says why.
	Refused bool
	// Waiting: the change waits on the members; look again soon.
	Waiting bool
}

// Plan picks the claim template.
func Plan(o Observed) Decision {
	if o.Running == nil {
		if o.PodClaims != "" {
			return Decision{Name: o.PodClaims, MoveLeaderTo: -1, Rule: RuleAdopt, Reason: fmt.Sprintf(
				"no StatefulSet, member pods mount the claims of template %q: created with it, so every member keeps its volume", o.PodClaims)}
		}
		return Decision{Name: o.DefaultName, MoveLeaderTo: -1, Rule: RuleNew, Reason: "no member runs yet"}
	}
	run := *o.Running
	if run.Class == o.Desired.Class && run.Capacity == o.Desired.Capacity {
		return Decision{Name: run.Name, MoveLeaderTo: -1, Rule: RuleSteady, Reason: fmt.Sprintf("claims %q: %s", run.Name, describe(run))}
	}
	change := fmt.Sprintf("%s → %s", describe(run), describe(o.Desired))
	switch {
	case o.Replicas < MinMembers:
		return Decision{Name: run.Name, MoveLeaderTo: -1, Rule: RuleRefuseFew, Refused: true, Reason: fmt.Sprintf(
			"volume change %s not made: %d member(s); a member moved to a new volume starts empty and joins the others, at least %d are needed (back up and restore onto the new volumes instead)",
			change, o.Replicas, MinMembers)}
	case !o.Ready:
		return Decision{Name: run.Name, MoveLeaderTo: -1, Rule: RuleWaitReady, Waiting: true, Reason: fmt.Sprintf(
			"volume change %s waits until every member is ready: each member moved starts empty and needs the others' data and quorum", change)}
	}
	last := o.Replicas - 1
	switch o.LeaderOrdinal {
	case last:
	case -1:
		return Decision{Name: run.Name, Rule: RuleWaitLeader, Waiting: true, MoveLeaderTo: -1, Reason: fmt.Sprintf(
			"volume change %s waits for a member to answer as the leader", change)}
	default:
		// The StatefulSet controller syncs the pods in ordinal batches and stops at the first batch
		// with an error, and every pod still on the old claims is one (its volumes cannot be
		// updated). A pod the rollout replaced is created again only if no lower ordinal is still
		// old: the rollout goes by ascending ordinal among followers and takes the leader last, so
		// the leader must hold the highest ordinal.
		return Decision{Name: run.Name, Rule: RuleLeaderLast, Waiting: true, MoveLeaderTo: last, Reason: fmt.Sprintf(
			"volume change %s: moving leadership from ordinal %d to %d first, so that the members move in ordinal order",
			change, o.LeaderOrdinal, last)}
	}
	return Decision{Name: o.Desired.Name, Recreate: true, MoveLeaderTo: -1, Rule: RuleRecreate, Reason: fmt.Sprintf(
		"volume change %s: the StatefulSet is created again with claims %q (its pods kept), and the members move to them one at a time, the leader last; the claims %q stay as they are",
		change, o.Desired.Name, run.Name)}
}

func describe(c Claims) string {
	class := c.Class
	if class == "" {
		class = "the default class"
	}
	return fmt.Sprintf("%s of %s", c.Capacity, class)
}
