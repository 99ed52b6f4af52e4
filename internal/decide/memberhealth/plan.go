package memberhealth

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// DefaultNotReadyGrace is how long a member stays NotReady before its pod is deleted unless the
// configuration says otherwise: etcd-druid's controllers.etcd.etcdMember.notReadyThreshold
// default.
const DefaultNotReadyGrace = 5 * time.Minute

// Member is one member of the Etcd's status (status.members) with what the controller learnt
// of it from its pod and from etcd.
type Member struct {
	// Name is the member's pod.
	Name string
	// NotReady: the member's status is NotReady; Reason is the status's reason.
	NotReady bool
	Reason   string
	// NotReadyFor is how long the status has been NotReady (now − lastTransitionTime).
	NotReadyFor time.Duration
	// Pod: the member's pod exists and is not terminating; PodAge is how long it has existed. A
	// pod younger than the grace is never deleted: the member's status may be NotReady since
	// before that pod was created (its predecessor's), and it gets the grace to start.
	Pod    bool
	PodAge time.Duration
	// Voter: etcd's member list has the member as a voting member (not a learner).
	Voter bool
	// Heard: the leader hears the member, as the leader sees it (meaningful only with
	// Observed.HeardKnown).
	Heard bool
}

// Observed is one look at an Etcd's members.
type Observed struct {
	Members []Member
	// NotReadyGrace is how long a member stays NotReady before its pod is deleted
	// (DefaultNotReadyGrace when not positive).
	NotReadyGrace time.Duration
	// MembersKnown: a member answered with etcd's member list (Member.Voter is meaningful).
	MembersKnown bool
	// Voters is the number of voting members in etcd's member list.
	Voters int
	// HeardKnown: the controller asked which voters the leader hears (Member.Heard). It asks
	// only when Plan waits on it (RuleHeardUnknown).
	HeardKnown bool
	// RolloutInFlight: a member pod is not at the StatefulSet's update revision, or terminating
	// (operation.RolloutInFlight); a pod deleted by this planner is terminating too.
	RolloutInFlight bool
	// Operations are the operations in flight on the Etcd (package operation).
	Operations operation.Set
}

// Action is what the controller does.
type Action string

const (
	ActionDeletePod Action = "delete-pod"
	ActionWait      Action = "wait"
	ActionDone      Action = "done"
)

// RuleID names a rule; ids are stable (Events, conditions, logs).
type RuleID = ruleid.ID

// Planner qualifies every rule id of this planner ("member-health/restart/participating"), so an
// Event reason says which planner wrote it (MemberHealthRestartParticipating).
const Planner = "member-health"

const (
	RuleDone              RuleID = Planner + "/done"
	RuleMembersUnknown    RuleID = Planner + "/wait/members-unknown"
	RuleHeardUnknown      RuleID = Planner + "/wait/heard-unknown"
	RuleQuorumLost        RuleID = Planner + "/wait/quorum-lost"
	RuleMajorityNotReady  RuleID = Planner + "/wait/majority-not-ready"
	RuleRestartUnsafe     RuleID = Planner + "/wait/restart-quorum"
	RuleRestartNonVoting  RuleID = Planner + "/restart/non-participating"
	RuleRestartHeardVoter RuleID = Planner + "/restart/participating"
)

// Decision is Plan's answer.
type Decision struct {
	Action Action `json:"action"`
	Rule   RuleID `json:"rule"`
	// Reason is for humans and carries the numbers.
	Reason string `json:"reason"`
	// Pod is the pod to delete (delete-pod).
	Pod string `json:"pod,omitempty"`
	// Stuck: some member is NotReady past the grace (whether or not its pod is deleted now).
	Stuck bool `json:"stuck,omitempty"`
}

// Plan decides, for one observation, whether a pod is deleted now, which one, or why not.
func Plan(o Observed) Decision {
	grace := o.NotReadyGrace
	if grace <= 0 {
		grace = DefaultNotReadyGrace
	}
	n := len(o.Members)
	notReady, stuck := []string{}, []*Member{}
	for i := range o.Members {
		m := &o.Members[i]
		if !m.NotReady {
			continue
		}
		notReady = append(notReady, m.Name)
		if m.NotReadyFor > grace && m.Pod && m.PodAge > grace {
			stuck = append(stuck, m)
		}
	}
	if len(stuck) == 0 {
		reason := fmt.Sprintf("no member NotReady longer than %s with a pod older than that (%d of %d members NotReady", grace, len(notReady), n)
		if len(notReady) > 0 {
			reason += ": " + strings.Join(notReady, ", ")
		}
		return Decision{Action: ActionDone, Rule: RuleDone, Reason: reason + ")"}
	}
	// Longest NotReady first; a member the leader does not hear before one it hears.
	sort.SliceStable(stuck, func(i, j int) bool {
		if stuck[i].Heard != stuck[j].Heard && o.HeardKnown {
			return !stuck[i].Heard
		}
		return stuck[i].NotReadyFor > stuck[j].NotReadyFor
	})
	names := make([]string, len(stuck))
	for i, m := range stuck {
		names[i] = fmt.Sprintf("%s (%s, NotReady for %s)", m.Name, m.Reason, m.NotReadyFor.Round(time.Second))
	}
	counts := fmt.Sprintf("%d of %d members NotReady, %d of them longer than %s: %s", len(notReady), n, len(stuck), grace, strings.Join(names, ", "))
	wait := func(rule RuleID, format string, args ...any) Decision {
		return Decision{Action: ActionWait, Rule: rule, Stuck: true, Reason: fmt.Sprintf(format, args...) + "; " + counts}
	}
	if o.RolloutInFlight {
		return wait(operation.WaitRule(Planner, operation.KindRollout), "a member pod is outdated or terminating (rollout, or a restart in flight): no pod deleted")
	}
	if len(o.Operations) > 0 {
		return wait(operation.WaitRule(Planner, o.Operations[0].Kind), "waiting for the %s to finish: no pod deleted", o.Operations.Describe())
	}
	if 2*len(notReady) >= n {
		return wait(RuleMajorityNotReady, "%d NotReady members of %d are no minority: restarting any is no scenario 9 (a majority NotReady is recovery's to judge)", len(notReady), n)
	}
	if !o.MembersKnown {
		return wait(RuleMembersUnknown, "no member answered with the member list: no pod deleted")
	}
	if !o.HeardKnown {
		return wait(RuleHeardUnknown, "which voters the leader hears is not known yet")
	}
	heard := 0
	for i := range o.Members {
		if o.Members[i].Voter && o.Members[i].Heard {
			heard++
		}
	}
	need := quorum.Of(o.Voters)
	if heard < need {
		return wait(RuleQuorumLost, "the leader hears %d of %d voters, a quorum is %d: quorum is lost, no pod deleted", heard, o.Voters, need)
	}
	for _, m := range stuck {
		if m.Voter && m.Heard {
			if heard-1 < need {
				continue
			}
			return Decision{Action: ActionDeletePod, Rule: RuleRestartHeardVoter, Pod: m.Name, Stuck: true, Reason: fmt.Sprintf(
				"deleting pod %s so it restarts: the leader hears it, and without it still hears %d of %d voters (a quorum is %d); %s",
				m.Name, heard-1, o.Voters, need, counts)}
		}
		return Decision{Action: ActionDeletePod, Rule: RuleRestartNonVoting, Pod: m.Name, Stuck: true, Reason: fmt.Sprintf(
			"deleting pod %s so it restarts: it takes no part in the quorum (voter %t, heard by the leader %t), the leader hears %d of %d voters (a quorum is %d); %s",
			m.Name, m.Voter, m.Heard, heard, o.Voters, need, counts)}
	}
	return wait(RuleRestartUnsafe, "the leader hears every stuck member and %d of %d voters; without one it would hear %d, fewer than a quorum of %d: no pod deleted",
		heard, o.Voters, heard-1, need)
}
