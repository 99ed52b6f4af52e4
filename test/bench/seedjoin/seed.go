// Package seedjoin is the experiment of issue #28: does a member that joins a running cluster
// (as a learner) start any faster, and load its leader any less, when its data directory is
// seeded from the latest full snapshot? It prepares a joining member's data directory three ways
// and measures a scale-out 3→5 on real etcd members (seedjoin_test.go):
//
//   - empty: today's path, etcd's leader sends the member everything;
//   - db-only: the full snapshot's database dropped in as member/snap/db, no WAL; this is what
//     "restore the latest full snapshot" gives when the restore writes no raft state;
//   - raft: the database plus a WAL and a raft snapshot record at the database's consistent
//     index and term, under the member ID MemberAddAsLearner assigned and the running cluster's
//     ID: the only form in which etcd resumes from the seeded database (docs/benchmarks.md, "Seeding a
//     joining member").
//
// The code here is an experiment's, not the operator's: it trusts that the snapshot is this
// cluster's own and recent (see the doc for why the operator does not do this).
package seedjoin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
)

// Joiner is the member being added: what MemberAddAsLearner returned and the cluster it joined.
type Joiner struct {
	ID        uint64
	ClusterID uint64
	Name      string
	PeerURL   string
}

// SeedPoint is where a seeded member's raft log starts: the database's consistent index and the
// term of that entry.
type SeedPoint struct {
	Index, Term uint64
	Voters      []uint64
	Learners    []uint64
}

// SeedDBOnly copies the snapshot database into dataDir as the member's backend and nothing
// else: etcd then joins as for an empty directory (no WAL) and keeps this file only until the
// leader's raft snapshot replaces it.
func SeedDBOnly(db, dataDir string) error {
	return copyFile(db, backendPath(dataDir))
}

// SeedRaft copies the snapshot database into dataDir and writes the raft state etcd needs to
// restart from it as member j of the running cluster: a WAL whose metadata names j.ID and
// j.ClusterID, holding a snapshot record and a HardState at the database's consistent index and
// term, and the matching .snap file (membership in etcd's v2 format, which 3.6 reads). The
// membership is the snapshot's: the joiner enters it when etcd applies its MemberAddAsLearner
// entry from the leader's log.
func SeedRaft(db, dataDir string, j Joiner) (SeedPoint, error) {
	if err := copyFile(db, backendPath(dataDir)); err != nil {
		return SeedPoint{}, err
	}
	lg := zap.NewNop()
	point, v2Membership, err := prepareBackend(lg, backendPath(dataDir), j)
	if err != nil {
		return SeedPoint{}, err
	}
	if err := writeRaftState(lg, dataDir, j, point, v2Membership); err != nil {
		return SeedPoint{}, err
	}
	return point, nil
}

// prepareBackend reads the seed point from the database and adds the joiner to its membership;
// it returns the membership in v2 form for the raft snapshot file.
func prepareBackend(lg *zap.Logger, path string, j Joiner) (SeedPoint, []byte, error) {
	be := backend.NewDefaultBackend(lg, path)
	defer be.Close()
	index, term := schema.ReadConsistentIndex(be.ReadTx())
	if index == 0 || term == 0 {
		return SeedPoint{}, nil, fmt.Errorf("%s records no consistent index/term (%d/%d): not an etcd 3.5+ snapshot", path, index, term)
	}
	cl := membership.NewCluster(lg)
	cl.SetBackend(schema.NewMembershipBackend(lg, be))
	cl.UnsafeLoad()
	cl.SetID(types.ID(j.ID), types.ID(j.ClusterID))
	if cl.Member(types.ID(j.ID)) != nil {
		return SeedPoint{}, nil, fmt.Errorf("member %x is already in the snapshot's membership", j.ID)
	}
	// The joiner is not added here: the log after the seed point holds its MemberAddAsLearner
	// entry and those of any member added since, and etcd validates each against the membership
	// at that point (a second learner would exceed --max-learners and be dropped).
	point := SeedPoint{Index: index, Term: term}
	for _, m := range cl.Members() {
		if m.IsLearner {
			point.Learners = append(point.Learners, uint64(m.ID))
		} else {
			point.Voters = append(point.Voters, uint64(m.ID))
		}
	}
	return point, etcdserver.GetMembershipInfoInV2Format(lg, cl), nil
}

// writeRaftState writes the WAL and the .snap file at the seed point.
func writeRaftState(lg *zap.Logger, dataDir string, j Joiner, p SeedPoint, v2Membership []byte) error {
	metadata, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: new(j.ID), ClusterID: new(j.ClusterID)})
	if err != nil {
		return fmt.Errorf("encoding the WAL metadata: %w", err)
	}
	confState := &raftpb.ConfState{Voters: p.Voters, Learners: p.Learners}
	raftSnap := &raftpb.Snapshot{
		Data:     v2Membership,
		Metadata: &raftpb.SnapshotMetadata{Index: new(p.Index), Term: new(p.Term), ConfState: confState},
	}
	if err := snap.New(lg, filepath.Join(dataDir, "member", "snap")).SaveSnap(raftSnap); err != nil {
		return fmt.Errorf("writing the raft snapshot file: %w", err)
	}
	w, err := wal.Create(lg, filepath.Join(dataDir, "member", "wal"), metadata)
	if err != nil {
		return fmt.Errorf("creating the WAL: %w", err)
	}
	if err := w.SaveSnapshot(&walpb.Snapshot{Index: new(p.Index), Term: new(p.Term), ConfState: confState}); err != nil {
		w.Close()
		return fmt.Errorf("writing the WAL snapshot record: %w", err)
	}
	// Commit at the seed point: the entries up to it are applied (they are the database).
	if err := w.Save(&raftpb.HardState{Term: new(p.Term), Commit: new(p.Index), Vote: new(uint64(0))}, nil); err != nil {
		w.Close()
		return fmt.Errorf("writing the WAL hard state: %w", err)
	}
	return w.Close()
}

func backendPath(dataDir string) string { return filepath.Join(dataDir, "member", "snap", "db") }

func copyFile(from, to string) (err error) {
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copying %s to %s: %w", from, to, err)
	}
	return nil
}
