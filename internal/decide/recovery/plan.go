package recovery

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/quorum"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// Voter is one recorded voter and what is known of it now.
type Voter struct {
	// Name is the pod the member stands for (the controller maps the recorded etcd name,
	// <prefix>-<pod> with spec.memberNamePrefix), or the recorded name when it maps to no pod;
	// ID its member ID in hex.
	Name string
	ID   string
	// PodUID is the incarnation of its pod now ("" when it has no pod).
	PodUID string
	// DataGone: the current incarnation of its pod proved that it holds no data of this member
	// (its init step, still running in this pod, reported an empty data dir and no leader).
	DataGone bool
	// HasData: positive evidence that it holds the old cluster's data: its etcd runs and
	// answered with the old cluster's ID, or its init step found valid data.
	HasData bool
	// State says what is known of it, for reasons ("no pod", "etcd down", "init: <decision>").
	State string
}

// Pod is one member pod, for replacing the pods of the old cluster after a restore.
type Pod struct {
	Name string
	// EtcdRunning: the pod is past its init step, its etcd container runs.
	EtcdRunning bool
	// ClusterID is the cluster ID (hex) its etcd reported just now, "" when it did not answer.
	ClusterID string
	// StartDecision is its init step's last decision, as reported on its Lease (for reasons).
	StartDecision string
	// NoSpace is set when this pod's init step reported that a restore did not fit its volume.
	NoSpace *SpaceShortage
	// UID is the pod's incarnation and Ordinal its place in the StatefulSet (etcd-<ordinal>).
	UID     string
	Ordinal int
	// ProvedEmpty: this very incarnation's init step, still running, reported an empty data dir
	// (the proof a voter without data gives). AwaitsBackup: it did so with the rule of a new
	// cluster's member whose backup store holds a backup (wait/bootstrap-from-backup).
	ProvedEmpty, AwaitsBackup bool
	// HasData: this incarnation's init step found valid data.
	HasData bool
	// PastInit: this incarnation's init step is over (and the pod is not being deleted): its
	// etcd runs, or the kubelet restarts it, on whatever data that step left.
	PastInit bool
	// State says what is known of it, for reasons.
	State string
}

// SpaceShortage is what a restore needs against what its volume has free, in bytes.
type SpaceShortage struct {
	Dir        string
	Need, Free int64
}

// State is the recovery under way, recorded in the Etcd's status (status.recovery), so an
// operator restart resumes it.
type State struct {
	// Member restores the backup and leads the new cluster; PodUID is the incarnation asked.
	Member string
	PodUID string
	// Token is the fencing token: the new cluster's initial-cluster-token.
	Token string
	// OldClusterID is the cluster that lost quorum.
	OldClusterID string
	// QuorumLostFor is how long quorum had been lost when the restore was ordered.
	QuorumLostFor time.Duration
}

// Observed is one consistent look at the Etcd and its members.
type Observed struct {
	// Voters are the recorded voters (status.voters) with what is known of each now.
	Voters []Voter
	// Pods are the member pods (for replacing those still running the old cluster).
	Pods []Pod
	// Desired is the Etcd's spec.replicas, the desired number of members (for reasons).
	Desired int
	// QuorumLost: the Ready condition says the voters lost quorum; QuorumLostFor since when.
	QuorumLost    bool
	QuorumLostFor time.Duration
	// Grace is how long quorum must have been lost before a restore is ordered.
	Grace time.Duration
	// LeaderAnswered: a member answered as leader just now; LeaderName, LeaderID (hex) and
	// LeaderClusterID are that member's.
	LeaderAnswered  bool
	LeaderName      string
	LeaderID        string
	LeaderClusterID string
	// RecordedClusterID is status.clusterID.
	RecordedClusterID string
	// BackupConfigured: spec.backup names a store.
	BackupConfigured bool
	// InProgress is the recovery under way (nil: none).
	InProgress *State
	// NewToken is the token a recovery ordered now would use (the controller makes it).
	NewToken string
	// ProofUnauthenticated says why the members' start reports cannot be told from forgeries
	// now ("": they can): the admission policy that lets only a member pod's own identity and the
	// operator write them is not in force (internal/operator/reportauth). A report then proves nothing:
	// no restore is ordered on it, and one under way is called off.
	ProofUnauthenticated string
}

// Action is what the controller does now.
type Action string

const (
	ActionNone            Action = "none"
	ActionWait            Action = "wait"
	ActionStart           Action = "start-restore"
	ActionCallOff         Action = "call-off"
	ActionRecordClusterID Action = "record-cluster-id"
	ActionReplacePod      Action = "replace-pod"
	ActionFinish          Action = "finish"
)

// RuleID names the rule behind a decision; ids are stable (events, conditions, logs). CamelCase
// (package ruleid) is the rule as a condition or Event reason.
type RuleID = ruleid.ID

const (
	RuleNotNeeded      RuleID = "recovery/not-needed"
	RuleLeaderAnswers  RuleID = "recovery/wait-leader-answers"
	RuleNoVoters       RuleID = "recovery/wait-voters-unrecorded"
	RuleDataRemains    RuleID = "recovery/wait-members-with-data"
	RuleGrace          RuleID = "recovery/wait-grace"
	RuleNoBackup       RuleID = "recovery/no-backup"
	RuleStart          RuleID = "recovery/start-restore"
	RuleCallOff        RuleID = "recovery/call-off"
	RuleRestoring      RuleID = "recovery/wait-restore"
	RuleRestoreNoSpace RuleID = "recovery/wait-restore-no-space"
	RuleRecordID       RuleID = "recovery/record-cluster-id"
	RuleReplaceOldPod  RuleID = "recovery/replace-old-member"
	RuleFinish         RuleID = "recovery/finish"
	// A new Etcd whose backup store already holds a backup (a copied etcd-druid bucket) starts
	// from it: ordered once every member proved an empty data dir, waited on until then.
	RuleBootstrapFromBackup RuleID = "recovery/bootstrap-from-backup"
	RuleBootstrapWait       RuleID = "recovery/wait-bootstrap-from-backup"
	// The proofs would suffice, but nothing stops a namespace user or a sibling pod from having
	// written them (Observed.ProofUnauthenticated).
	RuleProofUnauthenticated RuleID = "recovery/wait-proof-unauthenticated"
)

// Decision is Plan's answer.
type Decision struct {
	Action Action `json:"action"`
	Rule   RuleID `json:"rule"`
	Reason string `json:"reason"`
	// State is the recovery to order for ActionStart.
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
		return d.Rule == RuleRestoring || d.Rule == RuleRestoreNoSpace
	}
	return false
}

func decide(a Action, r RuleID, format string, args ...any) Decision {
	return Decision{Action: a, Rule: r, Reason: fmt.Sprintf(format, args...)}
}

// Plan decides the next recovery step.
func Plan(o Observed) Decision {
	if o.InProgress != nil {
		return planInProgress(o, *o.InProgress)
	}
	if d, ok := planBootstrap(o); ok {
		return d
	}
	if !o.QuorumLost {
		return decide(ActionNone, RuleNotNeeded, "the cluster has quorum")
	}
	if o.LeaderAnswered {
		// A leader means a quorum: members without data join it (learner replacement).
		return decide(ActionNone, RuleLeaderAnswers, "%s answers as leader of cluster %s: members without data join it, nothing is restored",
			o.LeaderName, o.LeaderClusterID)
	}
	lost := o.QuorumLostFor.Round(time.Second)
	if len(o.Voters) == 0 {
		return decide(ActionWait, RuleNoVoters, "quorum lost for %s, but the operator never saw the voting membership of cluster %s while it was quorate: without it no majority of voters can be proven lost, nothing is restored; a person must decide",
			lost, orNone(o.RecordedClusterID))
	}
	t := o.tally()
	if len(t.gone) < t.quorum {
		return decide(ActionWait, RuleDataRemains, "quorum lost for %s, but %s: they may still hold the data and bring the cluster back, nothing is restored; awaiting %s",
			lost, t.counts(), t.awaited(o.Voters))
	}
	if o.ProofUnauthenticated != "" {
		return decide(ActionWait, RuleProofUnauthenticated, "quorum lost for %s and %s, but these reports are not authenticated: %s; a report anyone with Lease write access may have written proves nothing, nothing is restored; a person must decide",
			lost, t.counts(), o.ProofUnauthenticated)
	}
	if o.QuorumLostFor < o.Grace {
		return decide(ActionWait, RuleGrace, "quorum lost for %s of the %s grace; %s", lost, o.Grace, t.counts())
	}
	if !o.BackupConfigured {
		return decide(ActionWait, RuleNoBackup, "quorum lost for %s and %s: the cluster cannot come back, and spec.backup names no store to restore from; a person must decide",
			lost, t.counts())
	}
	// The restoring member is a voter that proved it has no data: nothing of it is lost.
	candidate := t.gone[0]
	d := decide(ActionStart, RuleStart,
		"quorum lost for %s (grace %s) and %s: the old cluster %s cannot come back; restoring %s from the backup as a new single-member cluster, then replacing the old members (allowed only because quorum is already lost; their data is kept aside) and growing back to %d through learners",
		lost, o.Grace, t.counts(), orNone(o.RecordedClusterID), candidate.Name, o.Desired)
	d.State = &State{Member: candidate.Name, PodUID: candidate.PodUID, Token: o.NewToken, OldClusterID: o.RecordedClusterID, QuorumLostFor: o.QuorumLostFor}
	return d
}

func planInProgress(o Observed, s State) Decision {
	newCluster := o.LeaderAnswered && o.LeaderName == s.Member && o.LeaderClusterID != "" && o.LeaderClusterID != s.OldClusterID
	if !newCluster {
		if d, ok := callOff(o, s); ok {
			return d
		}
		leader := "no member answers as leader"
		if o.LeaderAnswered {
			leader = fmt.Sprintf("%s answers as leader of cluster %s", o.LeaderName, o.LeaderClusterID)
		}
		for _, p := range o.Pods {
			if n := p.NoSpace; p.Name == s.Member && n != nil {
				// A restore that does not fit fails at every try: a person must grow the
				// volume, so it is a rule (a reason, an Event) of its own, with the numbers.
				return decide(ActionWait, RuleRestoreNoSpace, "%s cannot restore from the backup: restore needs %d bytes, volume has %d free (%s, at %s); grow the member's volume or free space on it, the restore is tried again meanwhile (old cluster %s); %s",
					s.Member, n.Need, n.Free, shortBy(n), n.Dir, s.old(), leader)
			}
		}
		d := decide(ActionWait, RuleRestoring, "waiting for %s to restore from the backup and lead a new cluster (old cluster %s); %s",
			s.Member, s.old(), leader)
		for _, p := range o.Pods {
			if p.Name == s.Member && p.StartDecision != "" {
				d.Reason += fmt.Sprintf("; %s says: %s", p.Name, p.StartDecision)
			}
		}
		return d
	}
	if o.RecordedClusterID != o.LeaderClusterID {
		d := decide(ActionRecordClusterID, RuleRecordID, "%s restored and leads the new cluster %s (old %s): recording it",
			s.Member, o.LeaderClusterID, s.old())
		d.ClusterID = o.LeaderClusterID
		return d
	}
	for _, p := range o.Pods {
		if p.Name == s.Member {
			continue
		}
		// A pod whose etcd says it belongs to another cluster runs the old one. So does one past
		// its init step that does not answer: until the recovery finishes the new cluster has no
		// member but the restorer (learners are added after it), so no init step could have
		// joined it, and a member of the old cluster restarted by its kubelet (killed, crashed)
		// cannot serve without the quorum it lost. A pod still in its init step decides again
		// at its next poll, with the new cluster in view: it is left alone.
		var why string
		switch {
		case p.EtcdRunning && p.ClusterID != "" && p.ClusterID != o.LeaderClusterID:
			why = fmt.Sprintf("it runs a member of cluster %s", p.ClusterID)
		case p.PastInit && p.ClusterID == "":
			why = fmt.Sprintf("its init step is over and its etcd does not answer (%s): it runs, or its kubelet restarts it, on the data it had before the restore, cluster %s's", orNone(p.State), s.old())
		default:
			continue
		}
		// Its restart lets the init step keep its data aside and join the new cluster as a
		// learner.
		d := decide(ActionReplacePod, RuleReplaceOldPod,
			"deleting pod %s: %s, which lost quorum for good; its init step keeps its data aside and it joins the new cluster %s as a learner",
			p.Name, why, o.LeaderClusterID)
		d.Pod = p.Name
		return d
	}
	return decide(ActionFinish, RuleFinish, "%s leads the new cluster %s restored from the backup; no pod runs the old cluster %s; the membership controller grows it back to %d through learners",
		s.Member, o.LeaderClusterID, s.old(), o.Desired)
}

// callOff calls off a recovery the old cluster may survive, at any point before the restored
// member leads: a leader of another cluster than the restored one answers (the old cluster is
// back), or the proofs that a majority of the recorded voters lost their data no longer hold (a
// voter's pod came back with data, or was recreated and has not proven anything yet). The
// restoring member counts as without data throughout: it proved so before it was asked, and
// what it holds now is the restore.
func callOff(o Observed, s State) (Decision, bool) {
	if o.LeaderAnswered && (o.LeaderName != s.Member || o.LeaderClusterID == s.OldClusterID) {
		return decide(ActionCallOff, RuleCallOff, "%s answers as leader of cluster %s while %s restores a new cluster from the backup (old cluster %s): the cluster is back, calling the restore off; %s keeps what it restored aside",
			o.LeaderName, o.LeaderClusterID, s.Member, s.old(), s.Member), true
	}
	if d, ok := callOffBootstrap(o, s); ok {
		return d, true
	}
	if o.ProofUnauthenticated != "" {
		return decide(ActionCallOff, RuleCallOff, "the reports %s was ordered on are not authenticated any more (%s) while it restores from the backup (old cluster %s): calling the restore off; %s keeps what it restored aside",
			s.Member, o.ProofUnauthenticated, s.old(), s.Member), true
	}
	if len(o.Voters) == 0 {
		return Decision{}, false
	}
	t := o.tallyRestoring(s.Member)
	if len(t.gone) >= t.quorum {
		return Decision{}, false
	}
	return decide(ActionCallOff, RuleCallOff, "%s while %s restores from the backup: the voters that may hold data could bring cluster %s back, calling the restore off; awaiting %s",
		t.counts(), s.Member, s.old(), t.awaited(o.Voters)), true
}

// tally counts the recorded voters by what they proved.
type tally struct {
	// gone are the voters proven without data, lowest name first.
	gone   []Voter
	voters int
	quorum int
}

func (o Observed) tally() tally { return o.tallyRestoring("") }

// tallyRestoring counts restoring (the member ordered to restore) as without data.
func (o Observed) tallyRestoring(restoring string) tally {
	t := tally{voters: len(o.Voters), quorum: quorum.Of(len(o.Voters))}
	for _, v := range o.Voters {
		if (v.DataGone && !v.HasData && v.PodUID != "") || (restoring != "" && v.Name == restoring) {
			t.gone = append(t.gone, v)
		}
	}
	sort.SliceStable(t.gone, func(i, j int) bool { return t.gone[i].Name < t.gone[j].Name })
	return t
}

func (t tally) counts() string {
	return fmt.Sprintf("%d of %d recorded voters proved they lost their data (%s), %d may hold it, a restore needs %d proven",
		len(t.gone), t.voters, voterNames(t.gone), t.voters-len(t.gone), t.quorum)
}

// awaited lists the voters not proven without data, and why.
func (t tally) awaited(all []Voter) string {
	proven := map[string]bool{}
	for _, v := range t.gone {
		proven[v.Name+"/"+v.ID] = true
	}
	var out []string
	for _, v := range all {
		if proven[v.Name+"/"+v.ID] {
			continue
		}
		name := v.Name
		if name == "" {
			name = "(unnamed)"
		}
		out = append(out, fmt.Sprintf("%s (%s): %s", name, v.ID, v.State))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

func voterNames(vs []Voter) string {
	var n []string
	for _, v := range vs {
		n = append(n, v.Name)
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, ", ")
}

// old names the cluster a recovery replaces; a bootstrap from the backup replaces none.
func (s State) old() string {
	if s.OldClusterID == "" {
		return "none: a new Etcd starting from its backup"
	}
	return s.OldClusterID
}

func orNone(s string) string {
	if s == "" {
		return "(unrecorded)"
	}
	return s
}

func shortBy(n *SpaceShortage) string {
	return fmt.Sprintf("%d MiB short", (n.Need-n.Free+(1<<20)-1)>>20)
}
