package agent

import (
	"fmt"
	"sort"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
)

// StartObservation is everything the start decision (DEP-01's member scenarios) looks at.
type StartObservation struct {
	// Name is this member's name (its pod name); PeerURL its advertised peer URL.
	Name    string
	PeerURL string
	Data    memberlease.DataState
	// LeaderAnswered: a member that leads the cluster answered, and Members is its member list.
	// Only a leader's list is trusted: a partitioned follower's may be stale.
	LeaderAnswered bool
	Members        []etcdclient.Member
	// BootstrapState is the operator's record in the ConfigMap: "new" until the cluster has
	// formed once, "existing" after. BootstrapCluster is the initial cluster for "new".
	BootstrapState   string
	BootstrapCluster string
	// PodUID is this pod's incarnation.
	PodUID string
	// Restore is the operator's order, read from the Etcd's status (status.recovery, which only
	// the operator writes), that a member restore the cluster from the backup (nil: none). The
	// operator orders it only when quorum is lost and a majority of the recorded voters proved
	// that their data is gone (DEP-01 operator scenario 10).
	Restore *druidv1alpha1.RecoveryRequest
	// BackupConfigured: the member can read the Etcd's backup store.
	BackupConfigured bool
	// FormedBefore: the data dir has sets of data kept aside, so a cluster formed here before;
	// this member never bootstraps a new one, whatever the ConfigMap says.
	FormedBefore bool
	// Backup is what the backup store holds, asked only when this member would otherwise
	// bootstrap a new cluster (NeedsBackupCheck).
	Backup StoreBackup
	// BackupDetail says which backup was found, or why the store could not be asked (reasons).
	BackupDetail string
}

// StoreBackup is what a new cluster's member found in its backup store before bootstrapping.
type StoreBackup string

const (
	// BackupUnchecked: not asked (no store configured, or no bootstrap in view).
	BackupUnchecked StoreBackup = ""
	// BackupNone: the store holds no full snapshot: bootstrap empty, as always.
	BackupNone StoreBackup = "none"
	// BackupClaimed: another Etcd claimed the store (owner.json): its backups are never
	// restored here, so the member bootstraps empty (and the backup loop refuses the store).
	BackupClaimed StoreBackup = "claimed"
	// BackupFound: the store holds a full snapshot: the cluster starts from it, on the
	// operator's order.
	BackupFound StoreBackup = "found"
	// BackupUnknown: the store could not be asked. A backup may be there, so the member neither
	// bootstraps empty (that would start a second history beside the backup) nor restores: it
	// waits and asks again.
	BackupUnknown StoreBackup = "unknown"
)

// NeedsBackupCheck says whether the start decision turns on what the backup store holds: no
// data, no leader, no restore order for this pod, a cluster the operator never recorded as
// formed, and a store to ask. Only then does the init step ask the store.
func (o StartObservation) NeedsBackupCheck() bool {
	return o.BackupConfigured && o.Data == memberlease.DataEmpty && !o.LeaderAnswered && !o.Restore.For(o.Name, o.PodUID) &&
		o.BootstrapState == "new" && !o.FormedBefore
}

// StartAction is what the init step does.
type StartAction string

const (
	// StartAsIs: the data dir is the member's; etcd restarts from it.
	StartAsIs StartAction = "start-as-is"
	// StartNew: bootstrap a new cluster with the other initial members.
	StartNew StartAction = "start-new"
	// StartJoin: join the running cluster, which already lists this member.
	StartJoin StartAction = "join-existing"
	// StartMoveAside: rename the data dir aside (never delete it), then decide again.
	StartMoveAside StartAction = "move-data-aside"
	// StartWait: nothing safe to do yet; ask again later.
	StartWait StartAction = "wait"
	// StartRestore: restore the data dir from the backup as a new single-member cluster, then
	// start from it (the other members join it later as learners).
	StartRestore StartAction = "restore"
)

// StartRule ids are stable: they are logged and written to the member's Lease, where the
// operator reads them.
const (
	StartRuleRestart        = "restart/valid-data"
	StartRuleStaleData      = "stale-data/earlier-incarnation"
	StartRuleRemovedMember  = "stale-data/removed-member"
	StartRuleCorrupt        = "corrupt-data"
	StartRuleJoin           = "join/listed"
	StartRuleDataLost       = "wait/data-lost"
	StartRuleNotAdded       = "wait/not-added"
	StartRuleBootstrap      = "bootstrap/new"
	StartRuleClusterUnknown = "wait/cluster-unreachable"
	StartRuleRestore        = "restore/from-backup"
	StartRuleRestoreNoStore = "wait/restore-no-backup-store"
	// StartRuleBootstrapFromBackup: a member of a new cluster whose store holds a backup waits
	// for the operator to order one member to restore it (it reports its empty data dir as the
	// proof the operator counts).
	StartRuleBootstrapFromBackup = memberlease.StartRuleBootstrapFromBackup
	// StartRuleBackupUnknown: a member of a new cluster could not ask its backup store whether
	// it holds a backup; it neither bootstraps empty nor restores, and asks again.
	StartRuleBackupUnknown = "wait/backup-store-unreachable"
)

// StartDecision is the init step's answer.
type StartDecision struct {
	Action StartAction
	Rule   string
	Reason string
	// InitialCluster and ClusterState go into the etcd configuration for StartNew and StartJoin
	// (and are ignored by etcd on a restart with valid data).
	InitialCluster string
	ClusterState   string
	// LostMemberID is the member ID whose data is gone, for StartRuleDataLost: the operator
	// removes exactly this member and adds the pod again.
	LostMemberID uint64
	// Token is the new cluster's initial-cluster-token, for StartRestore.
	Token string
	// NoSpace is the shortage behind StartRuleRestoreNoSpace, reported on the Lease for the
	// operator to show.
	NoSpace *memberlease.SpaceShortage
	// Seeded: a StartJoin's data dir was seeded from the backup store (reported on the Lease:
	// the operator compares the learner's keyspace with the leader's before promoting it).
	Seeded bool
}

// DecideStart is the per-member start decision. It never starts "new" next to a cluster that
// answers or once the operator recorded the cluster as formed, and it never deletes data.
func DecideStart(o StartObservation) StartDecision {
	self := o.self()
	switch o.Data {
	case memberlease.DataCorrupt:
		return StartDecision{Action: StartMoveAside, Rule: StartRuleCorrupt,
			Reason: "the data dir has a member directory but no readable WAL and database; keeping it aside and starting without data"}
	case memberlease.DataValid:
		switch {
		case o.LeaderAnswered && self != nil && len(self.ClientURLs) == 0:
			return StartDecision{Action: StartMoveAside, Rule: StartRuleStaleData,
				Reason: fmt.Sprintf("the cluster lists this member as %x, never started, so the data dir is from an earlier member of this name; keeping it aside", self.ID)}
		case o.LeaderAnswered && self == nil:
			return StartDecision{Action: StartMoveAside, Rule: StartRuleRemovedMember,
				Reason: fmt.Sprintf("the leader's member list (%d members) does not hold %s: this member was removed; keeping its data aside", len(o.Members), o.PeerURL)}
		}
		return StartDecision{Action: StartAsIs, Rule: StartRuleRestart, Reason: "valid data dir: restarting the member from it",
			InitialCluster: o.BootstrapCluster, ClusterState: "existing"}
	}
	// No data.
	if o.LeaderAnswered {
		switch {
		case self == nil:
			return StartDecision{Action: StartWait, Rule: StartRuleNotAdded,
				Reason: fmt.Sprintf("the cluster (%d members) does not list %s yet: waiting for the operator to add it as a learner", len(o.Members), o.PeerURL)}
		case len(self.ClientURLs) > 0:
			return StartDecision{Action: StartWait, Rule: StartRuleDataLost, LostMemberID: self.ID,
				Reason: fmt.Sprintf("the cluster lists this member as %x, which has run before, but the data dir is empty: waiting for the operator to remove and add it again", self.ID)}
		}
		return StartDecision{Action: StartJoin, Rule: StartRuleJoin, ClusterState: "existing", InitialCluster: o.initialCluster(),
			Reason: fmt.Sprintf("the cluster lists this member as %x, not started yet: joining the %d members", self.ID, len(o.Members))}
	}
	// No data and no leader: the cluster has no quorum this member could join. Restore only when
	// the operator ordered this very pod incarnation (it counted a majority of the voters proven
	// without data, this one among them).
	if r := o.Restore; r.For(o.Name, o.PodUID) {
		if !o.BackupConfigured {
			return StartDecision{Action: StartWait, Rule: StartRuleRestoreNoStore,
				Reason: "the operator asked this member to restore from the backup, but the pod has no backup store configured"}
		}
		return StartDecision{Action: StartRestore, Rule: StartRuleRestore, ClusterState: "new", InitialCluster: o.Name + "=" + o.PeerURL, Token: r.Token,
			Reason: fmt.Sprintf("no data, no leader answers, and the operator asked this member to restore from the backup as a new single-member cluster (%s)", r.Reason)}
	}
	if o.BootstrapState == "new" && !o.FormedBefore {
		// A new cluster whose store already holds a backup starts from it (as etcd-druid's
		// etcd-backup-restore does), never beside it: this member waits for the operator's
		// order, which comes only once every member proved an empty data dir.
		switch {
		case o.BackupConfigured && o.Backup == BackupFound:
			return StartDecision{Action: StartWait, Rule: StartRuleBootstrapFromBackup,
				Reason: fmt.Sprintf("no data, no leader answers, the cluster has not formed yet and the backup store holds a backup (%s): not bootstrapping an empty cluster, waiting for the operator to order a member to restore it", o.BackupDetail)}
		case o.BackupConfigured && (o.Backup == BackupUnknown || o.Backup == BackupUnchecked):
			// Unchecked counts as unknown: a caller that did not ask the store gets no bootstrap.
			return StartDecision{Action: StartWait, Rule: StartRuleBackupUnknown,
				Reason: fmt.Sprintf("no data, no leader answers and the cluster has not formed yet, but the backup store could not be asked whether it holds a backup (%s): not bootstrapping an empty cluster beside a backup that may exist, asking again", orUnknown(o.BackupDetail))}
		}
		reason := "no leader answers and the cluster has not formed yet: bootstrapping it"
		if o.BackupConfigured {
			reason += " (" + o.BackupDetail + ")"
		}
		return StartDecision{Action: StartNew, Rule: StartRuleBootstrap, ClusterState: "new", InitialCluster: o.BootstrapCluster,
			Reason: reason}
	}
	return StartDecision{Action: StartWait, Rule: StartRuleClusterUnknown,
		Reason: "no data, no leader answers and the cluster has formed before: never starting a second cluster, waiting for the members"}
}

func (o StartObservation) self() *etcdclient.Member {
	for i := range o.Members {
		m := &o.Members[i]
		if m.Name == o.Name {
			return m
		}
		for _, u := range m.PeerURLs {
			if u == o.PeerURL {
				return m
			}
		}
	}
	return nil
}

// initialCluster lists the current members as etcd's --initial-cluster; the member that has not
// started yet (this one) has no name in the list and gets its own.
func (o StartObservation) initialCluster() string {
	var parts []string
	for _, m := range o.Members {
		name := m.Name
		if name == "" {
			name = o.Name
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func orUnknown(s string) string {
	if s == "" {
		return "not asked"
	}
	return s
}
