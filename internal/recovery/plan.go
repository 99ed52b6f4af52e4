// Package recovery decides the operator's part of recovering an etcd cluster that lost quorum
// together with the data of a majority of its members (DEP-01 operator scenario 10, "Quorum lost
// with a majority of members NotReady", and "Recovering an etcd cluster from failure of majority
// of members"): one member is restored from the backup as a new single-member cluster, the pods
// of the old cluster are replaced, and the membership controller grows the new cluster back to
// spec.replicas through learners.
//
// Plan is pure: the controller (internal/controller/recovery) observes, asks Plan, and carries
// out at most one action. Every rule has a stable id and every reason carries its numbers.
// Nothing is restored while a leader answers (a quorum exists: members without data join it),
// while fewer than a majority of the members are known to be without data (the members with
// data can still bring quorum back), or before quorum has been lost for the grace period. The
// recovery replaces voting members of the old cluster only because that cluster has lost quorum
// for good: no data of theirs is deleted (the member's init step keeps it aside).
package recovery

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/rollout"
)

// Pod is one member pod, as the controller sees it.
type Pod struct {
	Name    string
	Ordinal int
	// NoData: the pod's init step reported (on its Lease) that it has no data and no leader
	// answers: it waits and can never bring the old cluster back.
	NoData bool
	// EtcdRunning: the pod is past its init step, its etcd container runs.
	EtcdRunning bool
	// ClusterID is the cluster ID (hex) its etcd reported just now, "" when it did not answer.
	ClusterID string
	// StartDecision is its init step's last decision, as reported on its Lease (for reasons).
	StartDecision string
}

// State is a recovery under way, recorded on the Etcd so an operator restart resumes it.
type State struct {
	// Member restores the backup and leads the new cluster.
	Member string `json:"member"`
	// Token is the new cluster's initial-cluster-token.
	Token string `json:"token"`
	// OldClusterID is the cluster that lost quorum ("" when it was never recorded).
	OldClusterID string `json:"oldClusterID,omitempty"`
	// QuorumLostAt is when quorum was lost (RFC 3339), for the recovery time reported at the end.
	QuorumLostAt string `json:"quorumLostAt,omitempty"`
	// StartedAt is when the restore was asked for (RFC 3339).
	StartedAt string `json:"startedAt,omitempty"`
}

// Observed is one consistent look at the Etcd and its members.
type Observed struct {
	// Replicas is the number of members the cluster has (the StatefulSet's spec.replicas).
	Replicas int
	Pods     []Pod
	// QuorumLost: the Ready condition says the voters lost quorum; QuorumLostFor since when.
	QuorumLost    bool
	QuorumLostFor time.Duration
	// Grace is how long quorum must have been lost before a restore is started.
	Grace time.Duration
	// LeaderAnswered: a member answered as leader just now; LeaderName and LeaderClusterID are
	// that member's.
	LeaderAnswered  bool
	LeaderName      string
	LeaderClusterID string
	// RecordedClusterID is status.clusterID.
	RecordedClusterID string
	// BackupConfigured: spec.backup names a store.
	BackupConfigured bool
	// InProgress is the recovery under way (nil: none).
	InProgress *State
	// NewToken is the token a recovery started now would use (the controller makes it).
	NewToken string
}

// Action is what the controller does now.
type Action string

const (
	ActionNone            Action = "none"
	ActionWait            Action = "wait"
	ActionStart           Action = "start-restore"
	ActionRecordClusterID Action = "record-cluster-id"
	ActionReplacePod      Action = "replace-pod"
	ActionFinish          Action = "finish"
)

// RuleID names the rule behind a decision; ids are stable (events, conditions, logs).
type RuleID string

const (
	RuleNotNeeded     RuleID = "recovery/not-needed"
	RuleLeaderAnswers RuleID = "recovery/wait-leader-answers"
	RuleGrace         RuleID = "recovery/wait-grace"
	RuleDataRemains   RuleID = "recovery/wait-members-with-data"
	RuleNoBackup      RuleID = "recovery/no-backup"
	RuleNoCandidate   RuleID = "recovery/wait-no-candidate"
	RuleStart         RuleID = "recovery/start-restore"
	RuleRestoring     RuleID = "recovery/wait-restore"
	RuleRecordID      RuleID = "recovery/record-cluster-id"
	RuleReplaceOldPod RuleID = "recovery/replace-old-member"
	RuleFinish        RuleID = "recovery/finish"
)

// CamelCase is the rule as a condition or Event reason.
func (r RuleID) CamelCase() string { return rollout.RuleID(r).CamelCase() }

// Decision is Plan's answer.
type Decision struct {
	Action Action `json:"action"`
	Rule   RuleID `json:"rule"`
	Reason string `json:"reason"`
	// State is the recovery to record for ActionStart.
	State *State `json:"state,omitempty"`
	// Pod is the pod to replace (ActionReplacePod).
	Pod string `json:"pod,omitempty"`
	// ClusterID is the new cluster's ID (ActionRecordClusterID).
	ClusterID string `json:"clusterID,omitempty"`
}

// InProgress says whether the decision belongs to a recovery (the RecoveryInProgress condition).
func (d Decision) InProgress() bool {
	switch d.Action {
	case ActionStart, ActionRecordClusterID, ActionReplacePod:
		return true
	case ActionWait:
		return d.Rule == RuleRestoring
	}
	return false
}

// Quorum is the number of voters a cluster of n voters needs.
func Quorum(n int) int { return n/2 + 1 }

func decide(a Action, r RuleID, format string, args ...any) Decision {
	return Decision{Action: a, Rule: r, Reason: fmt.Sprintf(format, args...)}
}

// Plan decides the next recovery step.
func Plan(o Observed) Decision {
	if o.InProgress != nil {
		return planInProgress(o, *o.InProgress)
	}
	if !o.QuorumLost {
		return decide(ActionNone, RuleNotNeeded, "the cluster has quorum")
	}
	if o.LeaderAnswered {
		// A leader means a quorum: members without data join it (learner replacement).
		return decide(ActionNone, RuleLeaderAnswers, "%s answers as leader of cluster %s: members without data join it, nothing is restored",
			o.LeaderName, o.LeaderClusterID)
	}
	noData := o.noData()
	mayHaveData := o.Replicas - len(noData)
	q := Quorum(o.Replicas)
	counts := fmt.Sprintf("%d of %d members without data (%s), at most %d hold data, quorum needs %d",
		len(noData), o.Replicas, names(noData), mayHaveData, q)
	if mayHaveData >= q {
		return decide(ActionWait, RuleDataRemains, "quorum lost for %s, but %s: they can bring the cluster back, nothing is restored",
			o.QuorumLostFor.Round(time.Second), counts)
	}
	if o.QuorumLostFor < o.Grace {
		return decide(ActionWait, RuleGrace, "quorum lost for %s of the %s grace; %s",
			o.QuorumLostFor.Round(time.Second), o.Grace, counts)
	}
	if !o.BackupConfigured {
		return decide(ActionWait, RuleNoBackup, "quorum lost for %s and %s: the cluster cannot come back, and spec.backup names no store to restore from; a person must decide",
			o.QuorumLostFor.Round(time.Second), counts)
	}
	// The restoring member is a pod without data whose init step waits: nothing of it is lost.
	var candidate *Pod
	for i := range noData {
		if candidate == nil || noData[i].Ordinal < candidate.Ordinal {
			candidate = &noData[i]
		}
	}
	if candidate == nil {
		return decide(ActionWait, RuleNoCandidate, "quorum lost for %s; %s; no pod without data is waiting to restore", o.QuorumLostFor.Round(time.Second), counts)
	}
	d := decide(ActionStart, RuleStart,
		"quorum lost for %s (grace %s) and %s: the old cluster %s cannot come back; restoring %s from the backup as a new single-member cluster, then replacing the old members (allowed only because quorum is already lost; their data is kept aside) and growing back to %d through learners",
		o.QuorumLostFor.Round(time.Second), o.Grace, counts, orNone(o.RecordedClusterID), candidate.Name, o.Replicas)
	d.State = &State{Member: candidate.Name, Token: o.NewToken, OldClusterID: o.RecordedClusterID}
	return d
}

func planInProgress(o Observed, s State) Decision {
	newCluster := o.LeaderAnswered && o.LeaderName == s.Member && o.LeaderClusterID != "" && o.LeaderClusterID != s.OldClusterID
	if !newCluster {
		leader := "no member answers as leader"
		if o.LeaderAnswered {
			leader = fmt.Sprintf("%s answers as leader of cluster %s", o.LeaderName, o.LeaderClusterID)
		}
		d := decide(ActionWait, RuleRestoring, "waiting for %s to restore from the backup and lead a new cluster (old cluster %s); %s",
			s.Member, orNone(s.OldClusterID), leader)
		for _, p := range o.Pods {
			if p.Name == s.Member && p.StartDecision != "" {
				d.Reason += fmt.Sprintf("; %s says: %s", p.Name, p.StartDecision)
			}
		}
		return d
	}
	if o.RecordedClusterID != o.LeaderClusterID {
		d := decide(ActionRecordClusterID, RuleRecordID, "%s restored and leads the new cluster %s (old %s): recording it",
			s.Member, o.LeaderClusterID, orNone(s.OldClusterID))
		d.ClusterID = o.LeaderClusterID
		return d
	}
	for _, p := range o.Pods {
		// Only a pod whose etcd says it belongs to another cluster: one that does not answer may
		// be a learner of the new cluster that is still starting.
		if p.Name == s.Member || !p.EtcdRunning || p.ClusterID == "" || p.ClusterID == o.LeaderClusterID {
			continue
		}
		// Its restart lets the init step keep its data aside and join the new cluster as a
		// learner.
		d := decide(ActionReplacePod, RuleReplaceOldPod,
			"deleting pod %s: it runs a member of cluster %s, which lost quorum for good; its init step keeps its data aside and it joins the new cluster %s as a learner",
			p.Name, p.ClusterID, o.LeaderClusterID)
		d.Pod = p.Name
		return d
	}
	return decide(ActionFinish, RuleFinish, "%s leads the new cluster %s restored from the backup; no pod runs the old cluster %s; the membership controller grows it back to %d through learners",
		s.Member, o.LeaderClusterID, orNone(s.OldClusterID), o.Replicas)
}

func (o Observed) noData() []Pod {
	var out []Pod
	for _, p := range o.Pods {
		if p.NoData && p.Ordinal >= 0 && p.Ordinal < o.Replicas {
			out = append(out, p)
		}
	}
	return out
}

func names(ps []Pod) string {
	var n []string
	for _, p := range ps {
		n = append(n, p.Name)
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(unrecorded)"
	}
	return s
}
