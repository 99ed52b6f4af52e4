package seeding

import (
	"fmt"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// RuleID names the rule behind a decision (stable: logged and reported on the member's Lease).
type RuleID = ruleid.ID

const (
	// RuleSeed: seed from the latest full snapshot.
	RuleSeed RuleID = "seed/latest-full-snapshot"
	// RuleNotJoining: only a member joining a running cluster as a learner is ever seeded.
	RuleNotJoining RuleID = "seed/not-joining"
	// RuleNoStore: the member has no backup store configured.
	RuleNoStore RuleID = "seed/no-backup-store"
	// RuleDataKeptAside: data was kept aside next to this member's data dir (or that could not be
	// listed). A seeded member that fails before it publishes itself is judged stale at its next
	// start and its data set aside; seeding again each time would fill the volume with copies.
	RuleDataKeptAside RuleID = "seed/data-kept-aside"
	// RuleNoSnapshot: the store holds no full snapshot (or could not be read).
	RuleNoSnapshot RuleID = "seed/no-full-snapshot"
	// RuleOriginUnknown: the full snapshot records no origin (an etcd-druid backup, an old one):
	// it cannot be shown to be this cluster's.
	RuleOriginUnknown RuleID = "seed/origin-unknown"
	// RuleOtherCluster: the full snapshot was taken of another etcd cluster (another cluster ID,
	// or another Etcd).
	RuleOtherCluster RuleID = "seed/other-cluster"
	// RuleLeaderUnknown: the leader's status is not known.
	RuleLeaderUnknown RuleID = "seed/leader-unknown"
	// RuleTooFarBehind: the snapshot lies further behind the leader than the leader's log
	// reaches back; the leader would send its own snapshot and replace the seed.
	RuleTooFarBehind RuleID = "seed/too-far-behind"
	// RuleAhead: the snapshot claims a revision, index or term the leader has not reached: not
	// this history.
	RuleAhead RuleID = "seed/ahead-of-leader"
)

// DefaultCatchUpEntries is etcd's --snapshot-catchup-entries default (3.6, 3.7): how many
// applied entries the leader keeps in its log for slow followers.
const DefaultCatchUpEntries = 5000

// Leader is what the running cluster's leader says.
type Leader struct {
	Known        bool
	ClusterID    uint64
	Revision     int64
	AppliedIndex uint64
	Term         uint64
}

// Snapshot is the latest full snapshot as far as it is known: before it is fetched, its name and
// origin record; after, the raft position its database holds (Index 0: not fetched yet).
type Snapshot struct {
	Found bool
	Name  string
	// Revision is the revision its content holds.
	Revision int64
	// OriginRecorded says the store has its origin record; OriginClusterID (hex, as recorded)
	// and OriginEtcdUID are from it.
	OriginRecorded  bool
	OriginClusterID string
	OriginEtcdUID   string
	// Index and Term are the database's consistent index and the term of that entry.
	Index, Term uint64
}

// Observed is everything a decision needs.
type Observed struct {
	// Joining: the start decision is to join the running cluster with an empty data dir.
	Joining          bool
	BackupConfigured bool
	// DataKeptAside: data dirs are kept aside next to this member's (or they cannot be listed).
	DataKeptAside bool
	// EtcdUID is the UID of the Etcd this member belongs to ("" when unknown: not compared).
	EtcdUID  string
	Leader   Leader
	Snapshot Snapshot
	// CatchUpEntries is the leader's --snapshot-catchup-entries (0: etcd's default).
	CatchUpEntries uint64
}

// Decision is whether to seed, the rule and why.
type Decision struct {
	Seed   bool
	Rule   RuleID
	Reason string
}

type rule func(o Observed) (Decision, bool)

// rules are asked in order; the first that decides wins. Every one but the last says no.
var rules = []rule{notJoining, noStore, keptAside, noSnapshot, leaderUnknown, originUnknown, otherCluster, ahead, tooFarBehind}

// Decide says whether the joining member is seeded. It is asked twice: before the snapshot is
// fetched (Snapshot.Index 0: revisions bound the distance) and after (the database's consistent
// index gives it exactly); a member is seeded only if both say so.
func Decide(o Observed) Decision {
	for _, r := range rules {
		if d, ok := r(o); ok {
			return d
		}
	}
	return Decision{Seed: true, Rule: RuleSeed, Reason: fmt.Sprintf("full snapshot %s is this cluster's and %s behind the leader, within the %d entries its log keeps",
		o.Snapshot.Name, distance(o), o.catchUpEntries())}
}

func no(r RuleID, format string, args ...any) (Decision, bool) {
	return Decision{Rule: r, Reason: fmt.Sprintf(format, args...)}, true
}

func notJoining(o Observed) (Decision, bool) {
	if !o.Joining {
		return no(RuleNotJoining, "only a member joining the running cluster as a learner is seeded")
	}
	return Decision{}, false
}

func noStore(o Observed) (Decision, bool) {
	if !o.BackupConfigured {
		return no(RuleNoStore, "no backup store is configured: joining empty")
	}
	return Decision{}, false
}

func keptAside(o Observed) (Decision, bool) {
	if o.DataKeptAside {
		return no(RuleDataKeptAside, "data is kept aside next to the data dir (an earlier start of this member, seeded or not, was set aside): joining empty")
	}
	return Decision{}, false
}

func noSnapshot(o Observed) (Decision, bool) {
	if !o.Snapshot.Found {
		return no(RuleNoSnapshot, "the backup store holds no full snapshot: joining empty")
	}
	return Decision{}, false
}

func leaderUnknown(o Observed) (Decision, bool) {
	if !o.Leader.Known || o.Leader.ClusterID == 0 {
		return no(RuleLeaderUnknown, "the leader's status is not known: joining empty")
	}
	return Decision{}, false
}

func originUnknown(o Observed) (Decision, bool) {
	if !o.Snapshot.OriginRecorded || o.Snapshot.OriginClusterID == "" {
		return no(RuleOriginUnknown, "full snapshot %s records no origin cluster: it cannot be shown to be this cluster's, joining empty", o.Snapshot.Name)
	}
	return Decision{}, false
}

func otherCluster(o Observed) (Decision, bool) {
	running := fmt.Sprintf("%x", o.Leader.ClusterID)
	if o.Snapshot.OriginClusterID != running {
		return no(RuleOtherCluster, "full snapshot %s was taken of cluster %s, the running cluster is %s: joining empty",
			o.Snapshot.Name, o.Snapshot.OriginClusterID, running)
	}
	if o.EtcdUID != "" && o.Snapshot.OriginEtcdUID != "" && o.Snapshot.OriginEtcdUID != o.EtcdUID {
		return no(RuleOtherCluster, "full snapshot %s was taken of Etcd UID %s, this is %s: joining empty",
			o.Snapshot.Name, o.Snapshot.OriginEtcdUID, o.EtcdUID)
	}
	return Decision{}, false
}

func ahead(o Observed) (Decision, bool) {
	s, l := o.Snapshot, o.Leader
	if s.Revision > l.Revision || s.Index > l.AppliedIndex || s.Term > l.Term {
		return no(RuleAhead, "full snapshot %s (revision %d, index %d, term %d) is ahead of the leader (revision %d, applied index %d, term %d): not this history, joining empty",
			s.Name, s.Revision, s.Index, s.Term, l.Revision, l.AppliedIndex, l.Term)
	}
	return Decision{}, false
}

// tooFarBehind keeps half of the leader's log as a margin for the writes made while the member
// fetches the snapshot and starts. Before the fetch, revisions bound the distance from below:
// every revision is at least one entry.
func tooFarBehind(o Observed) (Decision, bool) {
	limit := o.catchUpEntries() / 2
	behind := uint64(o.Leader.Revision - o.Snapshot.Revision)
	if o.Snapshot.Index != 0 {
		behind = o.Leader.AppliedIndex - o.Snapshot.Index
	}
	if behind > limit {
		return no(RuleTooFarBehind, "full snapshot %s is %s behind the leader, more than half of the %d entries its log keeps: the leader would send its own snapshot, joining empty",
			o.Snapshot.Name, distance(o), o.catchUpEntries())
	}
	return Decision{}, false
}

func distance(o Observed) string {
	if o.Snapshot.Index != 0 {
		return fmt.Sprintf("%d entries", o.Leader.AppliedIndex-o.Snapshot.Index)
	}
	return fmt.Sprintf("%d revisions", o.Leader.Revision-o.Snapshot.Revision)
}

func (o Observed) catchUpEntries() uint64 {
	if o.CatchUpEntries == 0 {
		return DefaultCatchUpEntries
	}
	return o.CatchUpEntries
}
