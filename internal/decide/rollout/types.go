package rollout

import (
	"encoding/json"
	"slices"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

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
	// linearizable read, which needs a quorum; or that the member served the controller such a
	// read just now, before the kubelet's next probe (RejoinProven).
	Participating bool
	// RejoinProven is set when Participating comes from the controller's own linearizable read
	// through this updated member rather than from its readiness (Observed.WithRejoinProven).
	RejoinProven bool
	// Unheard is set when a handover from a leader pod to this member failed
	// (AnnotationHandoverFailedTo) and the member did not serve the controller a linearizable
	// read at this decision (Observed.WithUnheard): its readiness may not show yet that the
	// leader does not hear it, so no deletion counts on it.
	Unheard bool
	// NewVolume is set when the pod mounts its data from a claim of another template than the
	// StatefulSet's (a volume change in flight): deleting it brings it back on a new, empty
	// claim, so its data does not come back with it.
	NewVolume bool
	Container ContainerClass
	Role      Role
	// Member is what the etcd member said about itself over mTLS; the zero value when it was
	// not asked (LeaseOnly, a decision that does not depend on it) or did not answer.
	Member MemberStatus
	// HandoverFailures counts the leadership handovers from this pod that failed (the
	// controller records them on the pod, AnnotationHandoverFailures).
	HandoverFailures int
	// HandoverFailedTo names the transferees of those failed handovers
	// (AnnotationHandoverFailedTo): the next attempt goes to another member while one qualifies.
	HandoverFailedTo []string
}

// MemberStatus is the part of an etcd member's Status the planner uses.
type MemberStatus struct {
	// Reported is set when the member answered.
	Reported bool
	// AppliedIndex is the member's raft applied index; 0 means unknown (a running member has
	// applied at least its bootstrap entries).
	AppliedIndex uint64
	// Learner is set for a non-voting member, from its Status or from the member list.
	Learner bool
}

// Policy is the configured behaviour beyond DEP-07 (OperatorConfiguration
// controllers.ondelete). The zero value is DEP-07 as written: one participating member at a
// time, no catch-up gate, the leader deleted without a handover.
type Policy struct {
	// MaxConcurrent is how many participating members may be replaced at once; 0 and 1 mean
	// one at a time. The quorum's headroom (voters − quorum) caps it, and every voter that is
	// already unavailable, terminating, missing or a learner uses up part of it.
	MaxConcurrent int
	// CatchUp gates the deletion of a participating member: every voter that remains must be
	// within MaxAppliedIndexLag raft entries of the leader's applied index.
	CatchUp            bool
	MaxAppliedIndexLag uint64
	// Handover moves leadership to the best updated voter before the leader's pod is deleted;
	// after HandoverAttempts failures for one leader pod it is deleted anyway (etcd then hands
	// over at shutdown). 0 attempts means 1.
	Handover         bool
	HandoverAttempts int
	// RejoinByRead lets a replaced member count as back in the quorum as soon as it serves the
	// controller a linearizable read over mTLS, the check its readiness probe makes, instead of
	// up to a readiness period later when the kubelet probes it next. Only updated pods whose
	// etcd container runs are asked (AwaitingRejoin), and an answer only ever adds
	// participation: a pod the kubelet calls Ready is never taken for less.
	RejoinByRead bool
	// WaitForBackupReady postpones the replacement of participating members while the Etcd's
	// BackupReady condition is False (DEP-01; OperatorConfiguration
	// controllers.etcd.waitForBackupReady): Observed.Backup then holds (backupgate.Of).
	WaitForBackupReady bool
}

// DefaultPolicy is what the operator runs with unless configured otherwise.
func DefaultPolicy() Policy {
	return Policy{MaxConcurrent: 1, CatchUp: true, MaxAppliedIndexLag: DefaultMaxAppliedIndexLag, Handover: true, HandoverAttempts: DefaultHandoverAttempts,
		RejoinByRead: true, WaitForBackupReady: true}
}

const (
	// DefaultMaxAppliedIndexLag is the catch-up bound: a follower this close to the leader
	// needs no snapshot and is a fraction of a second behind under heavy load.
	DefaultMaxAppliedIndexLag = 1000
	// DefaultHandoverAttempts bounds the MoveLeader attempts for one leader pod.
	DefaultHandoverAttempts = 3
)

// Observed is one consistent look at a StatefulSet and its pods.
type Observed struct {
	// UpdateRevision is the StatefulSet's status.updateRevision.
	UpdateRevision string
	// StatefulSetReplicas is the StatefulSet's spec.replicas.
	StatefulSetReplicas int
	// Pods are the pods that exist; a missing ordinal is simply absent.
	Pods []PodState
	// Policy is configuration, not observation; it travels with the observation so Plan stays
	// a function of its one argument.
	Policy Policy
	// Operations are the other operations in flight on the Etcd (package operation): while one
	// is, no pod is deleted and no leadership moved.
	Operations operation.Set
	// Backup says whether voluntary disruptions wait for the Etcd's backup (package
	// backupgate): while it holds no participating member is replaced and no leadership moved.
	Backup backupgate.Gate
}

// Action is what the controller should do now.
type Action string

const (
	// ActionDelete deletes the pods named in Decision.Pods: one, or with quorum-headroom
	// concurrency several followers.
	ActionDelete Action = "delete"
	// ActionHandover moves leadership from the leader (Decision.Pods[0]) to
	// Decision.HandoverTo; its pod is deleted by a later decision, once it follows.
	ActionHandover Action = "handover"
	// ActionWait requeues: something has to settle before the next deletion.
	ActionWait Action = "wait"
	// ActionDone means every pod runs the update revision.
	ActionDone Action = "done"
)

// RuleID names the rule that made a decision. The ids are stable: they are printed by the plan
// command, label metrics and, through CamelCase (package ruleid), become condition and event
// reasons.
type RuleID = ruleid.ID

// Planner qualifies every rule id of this planner ("rollout/wait/catch-up"), so an Event reason
// says which planner wrote it (RolloutWaitCatchUp).
const Planner = "rollout"

const (
	// RuleOutOfBounds refuses an observation larger than any cluster the operator runs (replicas,
	// pod count or a pod ordinal beyond MaxMembers): it is bad input, never a reason to act.
	RuleOutOfBounds               RuleID = Planner + "/refuse/out-of-bounds"
	RuleNoUpdateRevision          RuleID = Planner + "/wait/no-update-revision"
	RuleDone                      RuleID = Planner + "/done"
	RuleSingleNode                RuleID = Planner + "/single-node"
	RuleNonParticipatingDead      RuleID = Planner + "/non-participating/dead"
	RuleNonParticipatingTransient RuleID = Planner + "/non-participating/transient"
	RuleNonParticipatingUnknown   RuleID = Planner + "/non-participating/unknown"
	RuleNonParticipatingAlive     RuleID = Planner + "/non-participating/alive-unready"
	// RuleNewVolumeNoQuorum keeps a non-participating member whose pod would come back on a new,
	// empty volume while the participating voters are no quorum: its data may be what brings
	// the quorum back.
	RuleNewVolumeNoQuorum        RuleID = Planner + "/wait/new-volume-no-quorum"
	RulePodTerminating           RuleID = Planner + "/wait/pod-terminating"
	RulePodMissing               RuleID = Planner + "/wait/pod-missing"
	RuleUpdatedNotParticipating  RuleID = Planner + "/wait/updated-not-participating"
	RuleScaleDown                RuleID = Planner + "/wait/scale-down"
	RuleParticipatingFollower    RuleID = Planner + "/participating/follower"
	RuleParticipatingUnknownRole RuleID = Planner + "/participating/unknown-role"
	RuleParticipatingLeader      RuleID = Planner + "/participating/leader"
	// RuleQuorumHeadroom waits while the voters already unavailable use up the quorum's
	// headroom (or the cluster has none, as an even count of two).
	RuleQuorumHeadroom RuleID = Planner + "/wait/quorum-headroom"
	// RuleCatchUp waits for a voter that would remain to come within the applied-index bound.
	RuleCatchUp RuleID = Planner + "/wait/catch-up"
	// RuleHandoverTargetUnheard holds a participating deletion while a member a handover failed
	// to reach looks ready but cannot serve a linearizable read: the leader may not hear it.
	RuleHandoverTargetUnheard RuleID = Planner + "/wait/handover-target-unheard"
	// RuleHandover moves leadership off the leader before its pod is deleted.
	RuleHandover RuleID = Planner + "/handover/move-leader"
	// RuleLeaderNoTransferee deletes the leader without a handover: no updated voter that
	// answered could take over (or the leader itself did not answer).
	RuleLeaderNoTransferee RuleID = Planner + "/participating/leader-no-transferee"
	// RuleLeaderHandoverFailed deletes the leader after the bounded handover attempts failed.
	RuleLeaderHandoverFailed RuleID = Planner + "/participating/leader-handover-failed"
	// RuleNoCandidate is a safety net: no rule matched although the rollout is not done. The rule
	// set is built so that this cannot happen; if it does, waiting is the safe answer.
	RuleNoCandidate RuleID = Planner + "/wait/no-candidate"
	// RuleBackupNotReady waits while the Etcd's BackupReady is False and waiting for it is
	// configured (package backupgate); outdated members that do not participate are still
	// replaced, which costs the quorum nothing.
	RuleBackupNotReady RuleID = Planner + "/" + backupgate.Wait
)

// The operation rules wait while another operation is in flight on the Etcd (package
// operation): one id per kind of operation, operation.WaitRule(kind).
var (
	RuleScaleInFlight           = operation.WaitRule(Planner, operation.KindScale)
	RuleRecoveryInFlight        = operation.WaitRule(Planner, operation.KindRecovery)
	RuleDefragmentationInFlight = operation.WaitRule(Planner, operation.KindDefragmentation)
	RuleStrategyHoldInFlight    = operation.WaitRule(Planner, operation.KindStrategyHold)
)

// Decision is the planner's answer for one observation.
type Decision struct {
	Action Action `json:"action"`
	// Pods are the pods to delete when Action is delete (followers first, by rank), the
	// leader handing over when Action is handover, and empty otherwise.
	Pods []string `json:"pods,omitempty"`
	// HandoverTo is the pod leadership moves to when Action is handover.
	HandoverTo string `json:"handoverTo,omitempty"`
	Rule       RuleID `json:"rule"`
	// Reason is for humans and carries the numbers behind the decision.
	Reason string `json:"reason"`
	// WaitingFor names the pods (or missing pod names) a wait decision is blocked on.
	WaitingFor []string `json:"waitingFor,omitempty"`
}

// AnnotationHandoverFailures on a leader pod counts the failed handovers from it, so the
// planner (and `plan` on a saved state) sees how many attempts are left.
const AnnotationHandoverFailures = "etcd-conductor.io/handover-failures"

// AnnotationHandoverFailedTo on a leader pod lists, comma-separated, the members a handover from
// it failed to reach: a transferee cut off from the leader fails every attempt, so the planner
// tries another one first.
const AnnotationHandoverFailedTo = "etcd-conductor.io/handover-failed-to"

// UnmarshalJSON also reads decisions recorded before a decision could name several pods,
// which carried the one pod as "pod".
func (d *Decision) UnmarshalJSON(data []byte) error {
	type plain Decision
	var v struct {
		plain
		Pod string `json:"pod"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*d = Decision(v.plain)
	if v.Pod != "" && len(d.Pods) == 0 {
		d.Pods = []string{v.Pod}
	}
	return nil
}

// Deletes reports whether the decision deletes pod name.
func (d Decision) Deletes(name string) bool {
	return d.Action == ActionDelete && slices.Contains(d.Pods, name)
}
