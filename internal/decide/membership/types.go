package membership

import (
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/backupgate"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/operation"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// Member is one entry of etcd's member list, with what the controller learnt about it.
type Member struct {
	ID uint64
	// Name is the pod the member stands for: the pod its etcd name maps to (<prefix>-<pod> with
	// spec.memberNamePrefix), or else the pod its peer URL names under the peer Service (a
	// learner that has not started yet: etcd knows only its peer URLs). When neither maps, the
	// member's own etcd name, for messages only: Ordinal is -1.
	Name string
	// Ordinal is the pod ordinal of Name, -1 when the member is no pod of this Etcd.
	Ordinal int
	Learner bool
	// Started: the member has run and published its client URLs.
	Started bool
	// Healthy: the member answered a status request just now. It runs and has its data, no
	// more: a member cut off from the leader on the peer network still answers the operator, so
	// no quorum is ever counted on Healthy.
	Healthy bool
	// Heard: the leader hears the member now, as the leader sees it. A voter is heard when it
	// answered as the leader, or when it served a linearizable read: its ReadIndex needs the
	// leader's confirmation, which a member the leader does not hear never gets. Every quorum is
	// counted on Heard, and only when Observed.HeardKnown. A learner cannot serve such a read
	// (etcd refuses it); what the leader sees of a learner is its progress, which etcd checks
	// itself at promotion (ErrLearnerNotReady below 90 % of the leader's log).
	Heard  bool
	Leader bool
	// SeenFor is how long the controller has seen this member as no pod of this Etcd (Ordinal
	// -1); such a member is removed only after Observed.SuperfluousGrace.
	SeenFor time.Duration
	// DataLost: its pod reports an empty or unusable data dir for this very member ID, so the
	// member can only come back removed and added again.
	DataLost bool
	// PeerURLs are the peer URLs the cluster records for the member (where the others dial it;
	// etcd keeps them sorted); PodPeerURLs those its pod advertises, its name under the peer
	// Service first, then its additional ones (spec.etcd.additionalAdvertisePeerURLs), nil when
	// it has no pod or the pod's are unknown.
	PeerURLs    []string
	PodPeerURLs []string
	// Seeded: the learner's data did not come from the leader alone: its pod reports it was
	// seeded from the backup store's latest full snapshot, or started on data it already had
	// (which may be such a seed). Whoever can write the bucket can plant that snapshot, so such a
	// learner is promoted only once its keyspace equals the leader's (Keyspace).
	Seeded bool
	// Keyspace compares the learner's keyspace with the leader's at one revision; nil when not
	// compared yet (the controller compares only when a plan without it waits on it,
	// RuleSeedUnverified).
	Keyspace *KeyspaceComparison
}

// KeyspaceComparison is a seeded learner's keyspace against the leader's, each digested at the
// same revision (etcd's HashKV is refused by a learner, a serializable range is not).
type KeyspaceComparison struct {
	// Compared: both digests were taken at Revision. False when either could not be (a member
	// did not answer, Revision was compacted meanwhile): then Error says why, and the learner
	// waits.
	Compared bool
	Revision int64
	// Learner and Leader are the digests, for the reason.
	Learner, Leader string
	Error           string
}

// Match tells whether the keyspaces were compared and are the same.
func (k *KeyspaceComparison) Match() bool { return k != nil && k.Compared && k.Learner == k.Leader }

// Observed is one consistent look at an Etcd, its StatefulSet and its members.
type Observed struct {
	// Desired is the Etcd's spec.replicas.
	Desired int
	// StatefulSetReplicas is the StatefulSet's spec.replicas.
	StatefulSetReplicas int
	// Bootstrapped: the Etcd's status records a cluster ID, the cluster has formed once.
	Bootstrapped bool
	// MembersKnown: a member answered with the member list; Members is meaningless otherwise.
	MembersKnown bool
	Members      []Member
	// HeardKnown: the controller asked which voters the leader hears (Member.Heard). It asks
	// only when a plan without it waits on it (RuleHeardUnknown), so a settled cluster costs no
	// read; without it no rule removes a voter, promotes, adds a learner or moves leadership.
	HeardKnown bool
	// SuperfluousGrace is how long a member no pod of this Etcd stands for is left alone (it may
	// be an administrator's doing, or a pod being renamed) before it is removed.
	SuperfluousGrace time.Duration
	// RolloutInFlight: some pod is not at the StatefulSet's update revision, or terminating.
	// Resizing waits for it; replacing lost members and finishing a learner do not.
	RolloutInFlight bool
	// Operations are the other operations in flight on the Etcd (package operation): while one
	// is, no member is added, promoted or removed.
	Operations operation.Set
	// Backup says whether voluntary disruptions wait for the Etcd's backup (package
	// backupgate): while it holds no voter of this Etcd is removed for a scale-in and no
	// leadership moved for one. Replacing lost members, learners and scale-out go on.
	Backup backupgate.Gate
}

// Action is what the controller does now.
type Action string

const (
	ActionAddLearner  Action = "add-learner"
	ActionPromote     Action = "promote"
	ActionRemove      Action = "remove"
	ActionMoveLeader  Action = "move-leader"
	ActionSetReplicas Action = "set-replicas"
	// ActionUpdatePeerURL records Decision.PeerURLs as Decision.Member's peer URLs.
	ActionUpdatePeerURL Action = "update-peer-url"
	ActionWait          Action = "wait"
	ActionDone          Action = "done"
)

// RuleID names the rule behind a decision; ids are stable (events, conditions, logs). CamelCase
// (package ruleid) turns one into a condition or Event reason ("membership/scale-out/add-learner" →
// "MembershipScaleOutAddLearner"), as for every planner's rules.
type RuleID = ruleid.ID

// Planner qualifies every rule id of this planner ("membership/scale-out/add-learner"), so an
// Event reason says which planner wrote it (MembershipScaleOutAddLearner).
const Planner = "membership"

const (
	RuleHibernate         RuleID = Planner + "/hibernate/set-replicas"
	RuleWake              RuleID = Planner + "/wake/set-replicas"
	RuleMembersUnknown    RuleID = Planner + "/wait/members-unknown"
	RuleHeardUnknown      RuleID = Planner + "/wait/heard-unknown"
	RuleBootstrapReplicas RuleID = Planner + "/bootstrap/set-replicas"
	RuleLearnerUnwanted   RuleID = Planner + "/learner/remove-unwanted"
	RulePromote           RuleID = Planner + "/learner/promote"
	RulePromoteUnsafe     RuleID = Planner + "/wait/promote-quorum"
	RuleLearnerPod        RuleID = Planner + "/scale-out/create-pod"
	RuleLearnerStarting   RuleID = Planner + "/wait/learner-starting"
	RuleReplaceDataLost   RuleID = Planner + "/replace/remove-data-lost"
	RuleReplaceUnsafe     RuleID = Planner + "/wait/replace-quorum"
	RuleRolloutInFlight   RuleID = Planner + "/wait/rollout-in-flight"
	RuleMoveLeader        RuleID = Planner + "/scale-in/move-leader"
	RuleNoLeaderTarget    RuleID = Planner + "/wait/no-leader-target"
	RuleRemove            RuleID = Planner + "/scale-in/remove-member"
	RuleRemoveUnsafe      RuleID = Planner + "/wait/remove-quorum"
	RuleShrink            RuleID = Planner + "/scale-in/shrink-statefulset"
	RuleAddLearner        RuleID = Planner + "/scale-out/add-learner"
	RuleAddUnsafe         RuleID = Planner + "/wait/add-quorum"
	RuleSuperfluousGrace  RuleID = Planner + "/wait/superfluous-grace"
	RuleSettleReplicas    RuleID = Planner + "/settle/set-replicas"
	RuleDone              RuleID = Planner + "/done"
	RuleUpdatePeerURL     RuleID = Planner + "/peer-url/follow-pod"
	// RuleSeedUnverified: a seeded learner is not promoted before its keyspace is compared with
	// the leader's at one revision (Member.Keyspace unknown or not comparable).
	RuleSeedUnverified RuleID = Planner + "/wait/seed-unverified"
	// RuleSeedMismatch: a seeded learner's keyspace differs from the leader's at the same
	// revision: the seed was not this cluster's data (a snapshot planted in the bucket). It is
	// removed (a learner: no quorum is lost) and its pod restarted, which moves its data aside;
	// it joins again, unseeded (internal/decide/seeding: data kept aside).
	RuleSeedMismatch RuleID = Planner + "/learner/remove-seed-mismatch"
	// RuleBackupNotReady holds a scale-in while the Etcd's BackupReady is False and waiting for
	// it is configured (package backupgate, DEP-01).
	RuleBackupNotReady RuleID = Planner + "/" + backupgate.Wait
)

// Decision is Plan's answer.
type Decision struct {
	Action Action `json:"action"`
	Rule   RuleID `json:"rule"`
	// Reason is for humans and carries the numbers.
	Reason string `json:"reason"`
	// Member is the member acted on (promote, remove, move-leader: the current leader).
	Member *Member `json:"member,omitempty"`
	// Target is the new leader of a move-leader.
	Target *Member `json:"target,omitempty"`
	// Ordinal is the pod ordinal a learner is added for.
	Ordinal int `json:"ordinal,omitempty"`
	// Replicas is the StatefulSet's new spec.replicas for set-replicas.
	Replicas int `json:"replicas,omitempty"`
	// PeerURLs are the member's new peer URLs for update-peer-url.
	PeerURLs []string `json:"peerURLs,omitempty"`
}

// InProgress says whether the decision is part of a membership change (the
// ScaleOperationInProgress condition).
func (d Decision) InProgress() bool {
	switch d.Action {
	case ActionDone:
		return false
	case ActionWait:
		return d.Rule != RuleMembersUnknown && d.Rule != RuleRolloutInFlight && !operation.IsWaitRule(d.Rule)
	}
	return true
}
