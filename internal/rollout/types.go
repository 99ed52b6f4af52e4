package rollout

import druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"

// MaxMembers is the largest cluster the planner plans for: the Etcd API's bound on spec.replicas.
// Plan refuses larger observations before sizing anything by them.
const MaxMembers = druidv1alpha1.MaxReplicas

// ContainerClass says whether the etcd process of a pod is alive, coming up or gone; it ranks
// non-participating pods (see the package documentation for the exact mapping).
type ContainerClass string

const (
	ContainerDead      ContainerClass = "Dead"
	ContainerTransient ContainerClass = "Transient"
	ContainerAlive     ContainerClass = "Alive"
	ContainerUnknown   ContainerClass = "Unknown"
)

// Role is a member's raft role as far as the controller knows it.
type Role string

const (
	RoleLeader   Role = "Leader"
	RoleFollower Role = "Follower"
	RoleUnknown  Role = "Unknown"
)

// PodState is what the planner needs to know about one member pod.
type PodState struct {
	Name            string
	Ordinal         int
	UID             string
	ResourceVersion string
	// Revision is the pod's controller-revision-hash label.
	Revision string
	// Terminating is set once the pod has a deletionTimestamp.
	Terminating bool
	// Participating means the etcd container is Ready, i.e. its readiness probe served a
	// linearizable read, which needs a quorum.
	Participating bool
	Container     ContainerClass
	Role          Role
}

// Observed is one consistent look at a StatefulSet and its pods.
type Observed struct {
	// UpdateRevision is the StatefulSet's status.updateRevision.
	UpdateRevision string
	// Replicas is the StatefulSet's spec.replicas.
	Replicas int
	// Pods are the pods that exist; a missing ordinal is simply absent.
	Pods []PodState
}

// Action is what the controller should do now.
type Action string

const (
	// ActionDelete deletes the one pod named in Decision.Pod.
	ActionDelete Action = "delete"
	// ActionWait requeues: something has to settle before the next deletion.
	ActionWait Action = "wait"
	// ActionDone means every pod runs the update revision.
	ActionDone Action = "done"
)

// RuleID names the rule that made a decision. The ids are stable: they are printed by the plan
// command, label metrics and, through CamelCase, become condition and event reasons.
type RuleID string

const (
	// RuleOutOfBounds refuses an observation larger than any cluster the operator runs (replicas,
	// pod count or a pod ordinal beyond MaxMembers): it is bad input, never a reason to act.
	RuleOutOfBounds               RuleID = "refuse/out-of-bounds"
	RuleNoUpdateRevision          RuleID = "wait/no-update-revision"
	RuleDone                      RuleID = "done"
	RuleSingleNode                RuleID = "single-node"
	RuleNonParticipatingDead      RuleID = "non-participating/dead"
	RuleNonParticipatingTransient RuleID = "non-participating/transient"
	RuleNonParticipatingUnknown   RuleID = "non-participating/unknown"
	RuleNonParticipatingAlive     RuleID = "non-participating/alive-unready"
	RulePodTerminating            RuleID = "wait/pod-terminating"
	RulePodMissing                RuleID = "wait/pod-missing"
	RuleUpdatedNotParticipating   RuleID = "wait/updated-not-participating"
	RuleScaleDown                 RuleID = "wait/scale-down"
	RuleParticipatingFollower     RuleID = "participating/follower"
	RuleParticipatingUnknownRole  RuleID = "participating/unknown-role"
	RuleParticipatingLeader       RuleID = "participating/leader"
	// RuleNoCandidate is a safety net: no rule matched although the rollout is not done. The rule
	// set is built so that this cannot happen; if it does, waiting is the safe answer.
	RuleNoCandidate RuleID = "wait/no-candidate"
)

// Decision is the planner's answer for one observation.
type Decision struct {
	Action Action `json:"action"`
	// Pod is the one pod to delete when Action is delete, and empty otherwise.
	Pod  string `json:"pod,omitempty"`
	Rule RuleID `json:"rule"`
	// Reason is for humans and carries the numbers behind the decision.
	Reason string `json:"reason"`
	// WaitingFor names the pods (or missing pod names) a wait decision is blocked on.
	WaitingFor []string `json:"waitingFor,omitempty"`
}
