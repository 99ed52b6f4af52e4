package defrag

import (
	"fmt"
	"sort"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// RuleID names the rule behind a decision. The ids are stable: they appear in Events, logs and
// metrics.
type RuleID = ruleid.ID

// Planner qualifies every rule id of this planner ("defrag/leader").
const Planner = "defrag"

const (
	RuleNotDue           RuleID = Planner + "/not-due"
	RuleRolloutInFlight  RuleID = Planner + "/wait/rollout-in-flight"
	RuleScaleInFlight    RuleID = Planner + "/wait/scale-in-flight"
	RuleMemberUnhealthy  RuleID = Planner + "/wait/member-unhealthy"
	RuleNoLeader         RuleID = Planner + "/wait/no-leader"
	RuleNoHeadroom       RuleID = Planner + "/skip/no-headroom"
	RuleFollower         RuleID = Planner + "/follower"
	RuleLeader           RuleID = Planner + "/leader"
	RuleDone             RuleID = Planner + "/done"
	RuleInvalidObserved  RuleID = Planner + "/wait/invalid-observation"
	RuleMemberNotInPlace RuleID = Planner + "/wait/member-missing"
	// RuleBackupNotReady postpones the run's next member while the Etcd's BackupReady is False
	// and waiting for it is configured (package backupgate, DEP-01).
	RuleBackupNotReady RuleID = Planner + "/" + backupgate.Wait
)

// Action is what the controller does next.
type Action string

const (
	// ActionNone: no run is due.
	ActionNone Action = "None"
	// ActionWait: a run is due but must not go on now; look again later.
	ActionWait Action = "Wait"
	// ActionSkip: a run is due but this cluster cannot afford it at all; the run ends unfinished.
	ActionSkip Action = "Skip"
	// ActionDefragment: defragment Decision.Member now, within Decision.Timeout.
	ActionDefragment Action = "Defragment"
	// ActionDone: every member was handled; the run ends.
	ActionDone Action = "Done"
)

// Member is one member as observed just before the decision.
type Member struct {
	Name string
	// Ready: the member pod's etcd container is ready, i.e. it serves linearizable reads.
	Ready bool
	// Reachable: the member answered a Status call over mTLS.
	Reachable bool
	Leader    bool
	Learner   bool
	// DBSize and DBSizeInUse are from the member's Status (bytes).
	DBSize      int64
	DBSizeInUse int64
}

// Observed is one look at a cluster during a due run.
type Observed struct {
	// Due is set while a scheduled run is in progress.
	Due bool
	// Desired is the Etcd's spec.replicas, the desired member count.
	Desired int
	// Members holds one entry per member pod that exists.
	Members []Member
	// RolloutInFlight: some member pod is not at the StatefulSet's update revision, or one is
	// terminating.
	RolloutInFlight bool
	// ScaleInFlight: the StatefulSet's replicas differ from the Etcd's or from its pod count.
	ScaleInFlight bool
	// Handled names the members this run already defragmented or tried to.
	Handled map[string]bool
	// Operations are the other operations in flight on the Etcd (package operation).
	Operations operation.Set
	// Backup says whether voluntary disruptions wait for the Etcd's backup (package backupgate).
	Backup backupgate.Gate
}

// Decision is what to do next and why; Reason carries the numbers.
type Decision struct {
	Action Action
	Rule   RuleID
	Member string
	Reason string
}

// Plan decides the next step of a defragmentation run. The rules are tried in order; the first
// that decides wins.
func Plan(o Observed) Decision {
	for _, rule := range []func(Observed) (Decision, bool){
		ruleNotDue,
		ruleValidObservation,
		ruleNoRollout,
		ruleNoScale,
		ruleNoOtherOperation,
		ruleBackupReady,
		ruleAllMembersPresent,
		ruleAllHealthy,
		ruleLeaderKnown,
		ruleHeadroom,
		ruleFollowersFirst,
		ruleLeaderLast,
	} {
		if d, ok := rule(o); ok {
			return d
		}
	}
	return Decision{Action: ActionDone, Rule: RuleDone, Reason: fmt.Sprintf("defragmented %s", handledList(o))}
}

func ruleNotDue(o Observed) (Decision, bool) {
	if o.Due {
		return Decision{}, false
	}
	return Decision{Action: ActionNone, Rule: RuleNotDue, Reason: "no defragmentation run is due"}, true
}

// ruleValidObservation refuses to act on an observation that cannot be true (two leaders, a
// duplicate name): acting on it could block the real leader.
func ruleValidObservation(o Observed) (Decision, bool) {
	seen := map[string]bool{}
	leaders := 0
	for _, m := range o.Members {
		if seen[m.Name] {
			return wait(RuleInvalidObserved, "member %s observed twice", m.Name), true
		}
		seen[m.Name] = true
		if m.Leader {
			leaders++
		}
	}
	if leaders > 1 {
		return wait(RuleInvalidObserved, "%d members claim leadership", leaders), true
	}
	return Decision{}, false
}

func ruleNoRollout(o Observed) (Decision, bool) {
	if !o.RolloutInFlight {
		return Decision{}, false
	}
	return wait(RuleRolloutInFlight, "a rollout is in flight: defragmentation waits until every member runs the update revision; %s", summary(o)), true
}

func ruleNoScale(o Observed) (Decision, bool) {
	if !o.ScaleInFlight {
		return Decision{}, false
	}
	return wait(RuleScaleInFlight, "a scale is in flight; %s", summary(o)), true
}

// ruleNoOtherOperation: one operation at a time. A membership change, a recovery or the
// hand-over to RollingUpdate counts members too; a member blocked by a defragmentation under it
// could cost the quorum.
func ruleNoOtherOperation(o Observed) (Decision, bool) {
	ops := o.Operations.Except(operation.KindDefragmentation)
	if len(ops) == 0 {
		return Decision{}, false
	}
	return wait(operation.WaitRule(Planner, ops[0].Kind), "waiting for the %s to finish; %s", ops.Describe(), summary(o)), true
}

// ruleBackupReady is DEP-01's "postpone potentially disruptive maintenance operations when the
// BackupReady condition is false": a member blocked by its defragmentation is one fewer to lose.
// The run waits (it is not skipped) and goes on with the next member once a backup succeeds.
func ruleBackupReady(o Observed) (Decision, bool) {
	if !o.Backup.Holds {
		return Decision{}, false
	}
	return wait(RuleBackupNotReady, "%s; %s", o.Backup.Waiting("defragmenting the next member"), summary(o)), true
}

func ruleAllMembersPresent(o Observed) (Decision, bool) {
	if len(o.Members) == o.Desired {
		return Decision{}, false
	}
	return wait(RuleMemberNotInPlace, "%d member pods for %d replicas; %s", len(o.Members), o.Desired, summary(o)), true
}

// ruleAllHealthy: a run goes on only while every member is ready and answers. A member that is
// down already costs the cluster the headroom a defragmentation needs.
func ruleAllHealthy(o Observed) (Decision, bool) {
	var unhealthy []string
	for _, m := range o.Members {
		switch {
		case !m.Ready:
			unhealthy = append(unhealthy, m.Name+" (not ready)")
		case !m.Reachable:
			unhealthy = append(unhealthy, m.Name+" (unreachable)")
		}
	}
	if len(unhealthy) == 0 {
		return Decision{}, false
	}
	return wait(RuleMemberUnhealthy, "waiting for %s; %s", strings.Join(unhealthy, ", "), summary(o)), true
}

func ruleLeaderKnown(o Observed) (Decision, bool) {
	for _, m := range o.Members {
		if m.Leader {
			return Decision{}, false
		}
	}
	return wait(RuleNoLeader, "no member reports itself leader; %s", summary(o)), true
}

// ruleHeadroom: blocking one voter must leave a quorum of healthy voters. A single-member
// cluster (or one with a voter down) has none, and its run is skipped rather than left waiting.
func ruleHeadroom(o Observed) (Decision, bool) {
	voters, healthy := 0, 0
	for _, m := range o.Members {
		if m.Learner {
			continue
		}
		voters++
		if m.Ready && m.Reachable {
			healthy++
		}
	}
	if headroom := healthy - quorum.Of(voters); headroom > 0 {
		return Decision{}, false
	}
	return Decision{Action: ActionSkip, Rule: RuleNoHeadroom, Reason: fmt.Sprintf(
		"no headroom: %d healthy of %d voters, quorum %d; blocking one would stop writes", healthy, voters, quorum.Of(voters))}, true
}

func ruleFollowersFirst(o Observed) (Decision, bool) {
	var next []Member
	for _, m := range o.Members {
		if !m.Leader && !o.Handled[m.Name] {
			next = append(next, m)
		}
	}
	if len(next) == 0 {
		return Decision{}, false
	}
	// The most to reclaim first: if the run is cut short, the largest gain is had.
	sort.Slice(next, func(i, j int) bool {
		gi, gj := reclaimable(next[i]), reclaimable(next[j])
		if gi != gj {
			return gi > gj
		}
		return next[i].Name < next[j].Name
	})
	m := next[0]
	return Decision{Action: ActionDefragment, Rule: RuleFollower, Member: m.Name, Reason: fmt.Sprintf(
		"defragmenting follower %s (db %d bytes, %d in use); %d follower(s) left after it; %s",
		m.Name, m.DBSize, m.DBSizeInUse, len(next)-1, summary(o))}, true
}

func ruleLeaderLast(o Observed) (Decision, bool) {
	for _, m := range o.Members {
		if m.Leader && !o.Handled[m.Name] {
			return Decision{Action: ActionDefragment, Rule: RuleLeader, Member: m.Name, Reason: fmt.Sprintf(
				"defragmenting leader %s last, every follower done (db %d bytes, %d in use); %s",
				m.Name, m.DBSize, m.DBSizeInUse, summary(o))}, true
		}
	}
	return Decision{}, false
}

func reclaimable(m Member) int64 {
	if m.DBSizeInUse > m.DBSize {
		return 0
	}
	return m.DBSize - m.DBSizeInUse
}

func wait(rule RuleID, format string, args ...any) Decision {
	return Decision{Action: ActionWait, Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

// summary states the cluster's numbers for a reason.
func summary(o Observed) string {
	voters, healthy := 0, 0
	for _, m := range o.Members {
		if !m.Learner {
			voters++
			if m.Ready && m.Reachable {
				healthy++
			}
		}
	}
	return fmt.Sprintf("%d/%d voters healthy, quorum %d, %s", healthy, voters, quorum.Of(voters), handledList(o))
}

func handledList(o Observed) string {
	var names []string
	for name, done := range o.Handled {
		if done {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none handled yet"
	}
	return "handled: " + strings.Join(names, ", ")
}
