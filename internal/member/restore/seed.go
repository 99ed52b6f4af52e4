package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
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

	"github.com/etcd-conductor/etcd-conductor/internal/contract/snapshot"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Seeding a joining member (issue #28). etcd's leader replicates by the follower's raft log: a
// data dir holding only a database has log index 0 and is sent the whole database as a raft
// snapshot, which replaces it (etcdserver applySnapshot → OpenSnapshotBackend). A seed is used
// only as a restarting member's state: the database, plus a WAL whose metadata names the member
// ID MemberAddAsLearner assigned and the running cluster's ID, holding a raft snapshot record and
// a HardState at the database's consistent index and term (bootstrapClusterWithWAL,
// recoverSnapshot: the backend is kept when its consistent index reaches the snapshot's). The
// leader then sends the entries after that index, if its log still holds them, or else its own
// snapshot, which replaces the seed as for an empty member. The membership is the snapshot's: the
// member enters it when it applies its own MemberAddAsLearner entry.

// SeedTarget is the learner being seeded: its member ID (from MemberAddAsLearner) and the ID of
// the cluster it joins.
type SeedTarget struct {
	MemberID, ClusterID uint64
}

// SeedPoint is where a seeded member's raft log starts: the database's consistent index, the
// term of that entry and the membership then.
type SeedPoint struct {
	Index, Term uint64
	Voters      []uint64
	Learners    []uint64
}

// SeedResult says what was seeded, for the report.
type SeedResult struct {
	Full     string
	Point    SeedPoint
	Bytes    int64
	Duration time.Duration
}

func (r SeedResult) String() string {
	return fmt.Sprintf("seeded from full snapshot %s at index %d, term %d (%d bytes read in %s)",
		r.Full, r.Point.Index, r.Point.Term, r.Bytes, r.Duration.Round(time.Millisecond))
}

// ErrSeedDeclined is returned when the fetched snapshot's point was judged unusable (the
// decide callback said no): the data dir is left as it was.
var ErrSeedDeclined = errors.New("seed declined")

// SeedOptions says which snapshot seeds which member.
type SeedOptions struct {
	Full snapshot.Snapshot
	// Open reads an object of the store by key.
	Open    func(ctx context.Context, key string) (io.ReadCloser, error)
	DataDir string
	Target  SeedTarget
	// Decide is asked with the fetched database's point before anything is written to DataDir;
	// an error declines the seed (wrapped in ErrSeedDeclined).
	Decide func(SeedPoint) error
	Log    logr.Logger
	Retry  Retry
}

// LatestFull is the store's latest full snapshot and its origin record (nil when none is
// recorded); ok is false when the store holds none. A store another Etcd claimed is refused.
func LatestFull(ctx context.Context, store backupstore.Store, owner snapshot.Owner) (snapshot.Snapshot, *snapshot.Origin, bool, error) {
	chain, ok, err := Latest(ctx, store, owner)
	if err != nil || !ok {
		return snapshot.Snapshot{}, nil, ok, err
	}
	origin, err := fullOrigin(ctx, store, chain.Full)
	if err != nil {
		return snapshot.Snapshot{}, nil, false, err
	}
	return chain.Full, origin, true, nil
}

// Seed fetches o.Full, checks it as a restore does (SHA-256 trailer, bbolt), reads its point,
// asks o.Decide and writes the member's data dir from it. On any error DataDir is left without a
// member directory: the member then joins empty.
func Seed(ctx context.Context, o SeedOptions) (SeedResult, error) {
	start := time.Now()
	res := SeedResult{Full: o.Full.Name()}
	if o.Retry.Attempts == 0 {
		o.Retry = DefaultRetry
	}
	if err := checkTarget(o.DataDir); err != nil {
		return res, err
	}
	work := o.DataDir + ".seed-work"
	if err := os.RemoveAll(work); err != nil {
		return res, fmt.Errorf("clearing %s: %w", work, err)
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return res, fmt.Errorf("creating %s: %w", work, err)
	}
	defer os.RemoveAll(work)
	db := filepath.Join(work, "member", "snap", "db")
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return res, fmt.Errorf("creating %s: %w", filepath.Dir(db), err)
	}
	read, _, err := fetch(ctx, Options{Open: o.Open, Retry: o.Retry, Log: o.Log}, o.Full, func(r io.Reader) error { return writeFile(db, r) })
	res.Bytes = read
	if err != nil {
		return res, fmt.Errorf("reading full snapshot %s: %w", o.Full.Name(), err)
	}
	if _, err := stripHash(db); err != nil {
		return res, fmt.Errorf("full snapshot %s: %w", o.Full.Name(), err)
	}
	if err := checkDB(db); err != nil {
		return res, fmt.Errorf("full snapshot %s: %w", o.Full.Name(), err)
	}
	point, err := WriteSeed(work, o.Target, o.Decide)
	res.Point = point
	if err != nil {
		return res, err
	}
	if err := os.RemoveAll(o.DataDir); err != nil { // checked above: holds no member data
		return res, fmt.Errorf("replacing %s: %w", o.DataDir, err)
	}
	if err := os.Rename(work, o.DataDir); err != nil {
		return res, fmt.Errorf("moving the seeded data into %s: %w", o.DataDir, err)
	}
	res.Duration = time.Since(start)
	return res, nil
}

// WriteSeed turns dataDir, whose member/snap/db is a full snapshot's database, into the data dir
// of the target member restarting at the database's point: the WAL and the raft snapshot file.
// decide (nil: always) is asked with the point first; its error declines.
func WriteSeed(dataDir string, target SeedTarget, decide func(SeedPoint) error) (SeedPoint, error) {
	lg := zap.NewNop()
	point, v2Membership, err := readSeedPoint(lg, filepath.Join(dataDir, "member", "snap", "db"), target)
	if err != nil {
		return point, err
	}
	if decide != nil {
		if err := decide(point); err != nil {
			return point, fmt.Errorf("%w: %w", ErrSeedDeclined, err)
		}
	}
	return point, writeRaftState(lg, dataDir, target, point, v2Membership)
}

// readSeedPoint reads the database's consistent index and term and its membership (also in
// etcd's v2 form, which etcd 3.6 reads from the raft snapshot file). The database is not changed.
func readSeedPoint(lg *zap.Logger, path string, target SeedTarget) (SeedPoint, []byte, error) {
	be := backend.NewDefaultBackend(lg, path)
	defer be.Close()
	index, term := schema.ReadConsistentIndex(be.ReadTx())
	if index == 0 || term == 0 {
		return SeedPoint{}, nil, fmt.Errorf("the database records no consistent index and term (%d, %d): not a snapshot of etcd 3.5 or later", index, term)
	}
	cl := membership.NewCluster(lg)
	cl.SetBackend(schema.NewMembershipBackend(lg, be))
	cl.UnsafeLoad()
	cl.SetID(types.ID(target.MemberID), types.ID(target.ClusterID))
	point := SeedPoint{Index: index, Term: term}
	for _, m := range cl.Members() {
		if m.ID == types.ID(target.MemberID) {
			return point, nil, fmt.Errorf("member %x is already in the snapshot's membership: not a joining member", target.MemberID)
		}
		if m.IsLearner {
			point.Learners = append(point.Learners, uint64(m.ID))
		} else {
			point.Voters = append(point.Voters, uint64(m.ID))
		}
	}
	if len(point.Voters) == 0 {
		return point, nil, errors.New("the database records no voting member")
	}
	return point, etcdserver.GetMembershipInfoInV2Format(lg, cl), nil
}

// writeRaftState writes the raft snapshot file and the WAL at the seed point.
func writeRaftState(lg *zap.Logger, dataDir string, target SeedTarget, p SeedPoint, v2Membership []byte) error {
	metadata, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: new(target.MemberID), ClusterID: new(target.ClusterID)})
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
		return fmt.Errorf("writing the WAL's snapshot record: %w", err)
	}
	// Committed up to the seed point: those entries are the database. No vote: the member has
	// voted in no election of this term.
	if err := w.Save(&raftpb.HardState{Term: new(p.Term), Commit: new(p.Index), Vote: new(uint64(0))}, nil); err != nil {
		w.Close()
		return fmt.Errorf("writing the WAL's hard state: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("closing the WAL: %w", err)
	}
	return nil
}
