package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/seeding"
	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
)

// seed prepares the data dir of a learner about to join from the backup store's latest full
// snapshot when internal/decide/seeding says it is this cluster's and close enough to the leader that
// the leader's log holds the rest (issue #28). It never stops the join: on any doubt or failure
// the data dir stays empty and the member joins as before. It returns what happened, for the
// reported reason.
func (i *Initializer) seed(ctx context.Context, dataDir string, obs StartObservation, leader etcdclient.MemberStatus) string {
	o := i.seedObservation(obs, leader)
	if !o.BackupConfigured || !o.Joining {
		return outcome(seeding.Decide(o))
	}
	store, err := i.cfg.BackupStore(ctx)
	if err != nil {
		return i.seedFailed(fmt.Errorf("opening the backup store: %w", err))
	}
	full, origin, found, err := restore.LatestFull(ctx, store, i.cfg.BackupOwner)
	if err != nil {
		return i.seedFailed(fmt.Errorf("looking for the latest full snapshot: %w", err))
	}
	o.Snapshot = snapshotSeen(full, origin, found)
	if d := seeding.Decide(o); !d.Seed {
		i.log.Info("Joining without a seed", "rule", d.Rule, "reason", d.Reason)
		return outcome(d)
	}
	self := obs.self()
	res, err := restore.Seed(ctx, restore.SeedOptions{
		Full:    full,
		Open:    func(ctx context.Context, key string) (io.ReadCloser, error) { return store.Get(ctx, key) },
		DataDir: dataDir,
		Target:  restore.SeedTarget{MemberID: self.ID, ClusterID: leader.ClusterID},
		// Asked again on the database's own raft position and the leader's status now (it went
		// on while the snapshot was fetched), before anything is written.
		Decide: func(p restore.SeedPoint) error {
			o.Snapshot.Index, o.Snapshot.Term = p.Index, p.Term
			now, answered, _ := i.askCluster(ctx, obs)
			o.Leader = leaderSeen(now, answered)
			if d := seeding.Decide(o); !d.Seed {
				return errors.New(outcome(d))
			}
			return nil
		},
		Log: i.log,
	})
	if err != nil {
		return i.seedFailed(err)
	}
	i.log.Info("Seeded the joining member", "result", res.String())
	return fmt.Sprintf("%s: %s", seeding.RuleSeed, res)
}

// seedObservation is what internal/decide/seeding decides on, before the store is asked.
func (i *Initializer) seedObservation(obs StartObservation, leader etcdclient.MemberStatus) seeding.Observed {
	self := obs.self()
	return seeding.Observed{
		Joining:          self != nil && self.IsLearner && obs.Data == memberlease.DataEmpty,
		BackupConfigured: i.cfg.BackupStore != nil,
		DataKeptAside:    i.formedBefore(),
		EtcdUID:          i.cfg.BackupOwner.EtcdUID,
		Leader:           leaderSeen(leader, leader.IsLeader()),
		CatchUpEntries:   catchUpEntries(i.cfg.settings()),
	}
}

func leaderSeen(leader etcdclient.MemberStatus, answered bool) seeding.Leader {
	return seeding.Leader{Known: answered && leader.IsLeader(), ClusterID: leader.ClusterID, Revision: leader.Revision,
		AppliedIndex: leader.RaftAppliedIndex, Term: leader.RaftTerm}
}

func snapshotSeen(full snapshot.Snapshot, origin *snapshot.Origin, found bool) seeding.Snapshot {
	s := seeding.Snapshot{Found: found, Name: full.Name(), Revision: full.EndRevision}
	if origin != nil {
		s.OriginRecorded, s.OriginClusterID, s.OriginEtcdUID = true, origin.ClusterID, origin.EtcdUID
	}
	return s
}

// catchUpEntries is the members' --snapshot-catchup-entries (3.7) or
// --experimental-snapshot-catchup-entries (3.6); 0 when unset (etcd's default). The members
// share one configuration, so this member's is the leader's.
func catchUpEntries(settings map[string]string) uint64 {
	for _, key := range []string{"snapshot-catchup-entries", "experimental-snapshot-catchup-entries"} {
		if n, err := strconv.ParseUint(settings[key], 10, 64); err == nil {
			return n
		}
	}
	return 0
}

func (i *Initializer) seedFailed(err error) string {
	i.log.Info("Not seeding the joining member; joining empty", "error", err.Error())
	return fmt.Sprintf("not seeded (%v): joining empty", err)
}

func outcome(d seeding.Decision) string { return fmt.Sprintf("%s: %s", d.Rule, d.Reason) }
