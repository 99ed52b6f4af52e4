package volumechange

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
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
	// RuleExpandClaims: the capacity grows within a class that allows expansion; the claims are
	// grown in place.
	RuleExpandClaims ruleid.ID = "volume/expand-claims"
	// RuleWaitExpanded: a claim's status.capacity has not reached the size asked yet.
	RuleWaitExpanded ruleid.ID = "volume/wait-claims-expanded"
	// RuleWaitMoved: the StatefulSet asks for the new claims, not every member is on them and ready.
	RuleWaitMoved ruleid.ID = "volume/wait-members-moved"
	// RuleExpanded: the claims grew in place; the change is done.
	RuleExpanded ruleid.ID = "volume/claims-expanded"
	// RuleDone: every member is on the claims the spec asks for; the old claims kept are named.
	RuleDone ruleid.ID = "volume/done"
)

// UnderWay are the rules under which a True VolumeChange marks a volume change in flight, which the
// other controllers wait for (internal/decide/operation): from the leadership move before the
// StatefulSet is recreated to the last member on the new claims. A refusal, and the waits for
// every member ready and for the leader's word, hold nobody: nothing has changed yet, and what the
// others do (a scale to spec.replicas, a member restarted) may be what it waits on.
var UnderWay = []ruleid.ID{RuleLeaderLast, RuleRecreate, RuleExpandClaims, RuleWaitExpanded, RuleWaitMoved}

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
	// NotSingle: the StatefulSet has no single claim template of ours (created by something else,
	// or by hand): nothing to change, it is rendered as created.
	NotSingle bool
	// PodClaims is the claim template the member pods mount ("" when no pod runs), read when there
	// is no StatefulSet.
	PodClaims string
	// Desired is what the spec asks for; Desired.Name is the name a change moves to.
	Desired Claims
	// DefaultName is the claim template name of a new Etcd.
	DefaultName string
	// DesiredReplicas is the Etcd's spec.replicas (Desired is the claims); Ready tells whether every member is ready.
	DesiredReplicas int
	Ready           bool
	// LeaderOrdinal is the ordinal of the leader's pod, -1 when no member said; asked only once the
	// change can be made.
	LeaderOrdinal int

	// The facts below are read only while a change is in view or recorded as in flight, so a
	// settled Etcd costs no read for them.

	// Recorded is the reason of the VolumeChange condition while it is True (a change not done
	// yet), "" otherwise.
	Recorded string
	// Class is what the API says of the running claims' storage class.
	Class Class
	// Members are the member pod names (ordinals below spec.replicas).
	Members []string
	// Mounted is the claim template each member pod mounts its data from, by pod name.
	Mounted map[string]string
	// Claims are the Etcd's data claims, as the API holds them.
	Claims []Claim
}

// Class is what the API says of a StorageClass.
type Class struct {
	Name string
	// Read: the StorageClass object was read; otherwise Err says why not (not found, no access).
	Read bool
	Err  string
	// AllowExpansion is its allowVolumeExpansion.
	AllowExpansion bool
}

// Claim is one data claim "<Template>-<Pod>".
type Claim struct {
	Name, Template, Pod string
	// Requested is spec.resources.requests.storage; Capacity is status.capacity.storage ("": none
	// yet).
	Requested, Capacity string
	// Resizing names the resize conditions the claim shows (FileSystemResizePending, …).
	Resizing string
	// Bound: the claim is bound to a volume; the apiserver lets only a bound claim grow.
	Bound bool
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
	// Expand are the claims whose request is to be raised to ExpandTo, before the StatefulSet is
	// created again.
	Expand   []string
	ExpandTo string
	// InFlight: the change is not done (the VolumeChange condition is True); false with Done.
	InFlight bool
	// Done: the change is done; Kept are the old claims left with their data.
	Done bool
	Kept []string
}

// Plan picks the claim template.
func Plan(o Observed) Decision {
	if o.NotSingle {
		return Decision{Name: o.DefaultName, MoveLeaderTo: -1, Rule: RuleSteady, Reason: "no single claim template: rendered as created"}
	}
	if o.Running == nil {
		if o.PodClaims != "" {
			return Decision{Name: o.PodClaims, MoveLeaderTo: -1, Rule: RuleAdopt, Reason: fmt.Sprintf(
				"no StatefulSet, member pods mount the claims of template %q: created with it, so every member keeps its volume", o.PodClaims)}
		}
		return Decision{Name: o.DefaultName, MoveLeaderTo: -1, Rule: RuleNew, Reason: "no member runs yet"}
	}
	run := *o.Running
	if run.Class == o.Desired.Class && run.Capacity == o.Desired.Capacity {
		if o.Recorded == "" {
			return Decision{Name: run.Name, MoveLeaderTo: -1, Rule: RuleSteady, Reason: fmt.Sprintf("claims %q: %s", run.Name, describe(run))}
		}
		return settle(o, run)
	}
	d := plan(o, run)
	d.InFlight = true
	return d
}

// plan decides on a change in view: run is not what the spec asks for.
func plan(o Observed, run Claims) Decision {
	change := fmt.Sprintf("%s → %s", describe(run), describe(o.Desired))
	// Why the claims are not grown in place, for the reasons of the move below.
	why := ""
	if grows(run, o.Desired) {
		if expandable(o.Class) {
			return expand(o, run, change)
		}
		why = " (" + notExpandable(o.Class) + ")"
	}
	switch {
	case o.DesiredReplicas < MinMembers:
		return Decision{Name: run.Name, MoveLeaderTo: -1, Rule: RuleRefuseFew, Refused: true, Reason: fmt.Sprintf(
			"volume change %s not made: %d member(s); a member moved to a new volume starts empty and joins the others, at least %d are needed (back up and restore onto the new volumes instead)%s",
			change, o.DesiredReplicas, MinMembers, why)}
	case !o.Ready:
		return Decision{Name: run.Name, MoveLeaderTo: -1, Rule: RuleWaitReady, Waiting: true, Reason: fmt.Sprintf(
			"volume change %s waits until every member is ready: each member moved starts empty and needs the others' data and quorum%s", change, why)}
	}
	last := o.DesiredReplicas - 1
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
	to := freeName(o, run)
	return Decision{Name: to, Recreate: true, MoveLeaderTo: -1, Rule: RuleRecreate, Reason: fmt.Sprintf(
		"volume change %s: the StatefulSet is created again with claims %q (its pods kept), and the members move to them one at a time, the leader last; the claims %q stay as they are%s",
		change, to, run.Name, why)}
}

// freeName is the claim template a move goes to: the desired name, unless claims of that name
// exist or run has it (a change back to a class and size the Etcd had before, or a shrink back
// after a growth in place kept the name): then the first "<name>-<n>" free of both. A member must
// start on a new, empty claim, never on one left with old data.
func freeName(o Observed, run Claims) string {
	used := map[string]bool{run.Name: true}
	for _, c := range o.Claims {
		used[c.Template] = true
	}
	name := o.Desired.Name
	for n := 2; used[name]; n++ {
		name = fmt.Sprintf("%s-%d", o.Desired.Name, n)
	}
	return name
}

// grows tells whether to is from with more capacity in the same class: the one change a volume
// can take in place.
func grows(from, to Claims) bool {
	return from.Class == to.Class && less(from.Capacity, to.Capacity)
}

// less compares two quantities; one that does not parse is never less (nothing is grown on it).
func less(a, b string) bool {
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	return errA == nil && errB == nil && qa.Cmp(qb) < 0
}

func expandable(c Class) bool { return c.Read && c.AllowExpansion }

// notExpandable says why claims of c cannot grow in place.
func notExpandable(c Class) string {
	switch {
	case c.Name == "":
		return "the claims name no storage class, so they cannot grow in place"
	case !c.Read:
		// Unknown is taken as no: the apiserver refuses a resize the class does not allow.
		return fmt.Sprintf("StorageClass %q cannot be read (%s), so it is taken as not allowing volume expansion", c.Name, c.Err)
	default:
		return fmt.Sprintf("StorageClass %q does not allow volume expansion", c.Name)
	}
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func describe(c Claims) string {
	class := c.Class
	if class == "" {
		class = "the default class"
	}
	return fmt.Sprintf("%s of %s", c.Capacity, class)
}
