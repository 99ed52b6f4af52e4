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
//     ID (restore.WriteSeed, what the init step writes): the only form in which etcd resumes from
//     the seeded database (docs/benchmarks.md, "Seeding a joining member");
//   - raft-stale: the same, from a snapshot further behind than the leader's log reaches (the
//     init step does not seed then, seeding.RuleTooFarBehind): the leader's snapshot replaces it.
//
// The snapshot is a local file here (no store), so "seeding" is a local copy: with a store it
// is the download.
package seedjoin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/etcd-conductor/etcd-conductor/internal/member/restore"
)

// SeedDBOnly copies the snapshot database into dataDir as the member's backend and nothing
// else: etcd then joins as for an empty directory (no WAL) and keeps this file only until the
// leader's raft snapshot replaces it.
func SeedDBOnly(db, dataDir string) error {
	return copyFile(db, backendPath(dataDir))
}

// SeedRaft copies the snapshot database into dataDir and writes the raft state beside it as the
// init step does (restore.WriteSeed).
func SeedRaft(db, dataDir string, target restore.SeedTarget) (restore.SeedPoint, error) {
	if err := copyFile(db, backendPath(dataDir)); err != nil {
		return restore.SeedPoint{}, err
	}
	return restore.WriteSeed(dataDir, target, nil)
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
