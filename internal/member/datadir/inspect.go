package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	etcddatadir "go.etcd.io/etcd/server/v3/storage/datadir"

	"github.com/etcd-conductor/etcd-conductor/internal/decide/ruleid"
)

// State is the verdict on a data dir.
type State string

const (
	// Empty: no member directory, or one that holds no file.
	Empty State = "Empty"
	// Valid: etcd would start from the data.
	Valid State = "Valid"
	// Corrupt: etcd's or bbolt's checks refuse the data (Report.Check, Report.Reason).
	Corrupt State = "Corrupt"
)

// Check names the check a Corrupt data dir failed. The ids are stable: they label metrics and,
// through CamelCase, condition and event reasons.
type Check string

const (
	// CheckWALMissing: the member directory holds files but no *.wal file in member/wal.
	CheckWALMissing Check = "wal/missing"
	// CheckWALSequence: a WAL file is missing from the sequence, or none covers the snapshot.
	CheckWALSequence Check = "wal/sequence"
	// CheckWALUnreadable: etcd's wal package rejects the records (CRC, metadata conflict,
	// snapshot record, entry indexes, a short record before the last file).
	CheckWALUnreadable Check = "wal/unreadable"
	// CheckWALMetadata: the WAL metadata does not decode or names no member.
	CheckWALMetadata Check = "wal/metadata"
	// CheckWALCommit: the HardState commits an index beyond the last entry.
	CheckWALCommit Check = "wal/commit-beyond-log"
	// CheckDBMissing: the WAL is there but member/snap/db is not.
	CheckDBMissing Check = "db/missing"
	// CheckDBInvalid: bbolt does not open the backend (not a bbolt file, meta checksums,
	// version, too small to hold its meta pages).
	CheckDBInvalid Check = "db/invalid"
	// CheckDBTruncated: the backend file is shorter than its meta page says.
	CheckDBTruncated Check = "db/truncated"
	// CheckDBUnreadable: bbolt fails reading the meta bucket, or the consistent index is not
	// etcd's 8-byte big-endian number.
	CheckDBUnreadable Check = "db/unreadable"
	// CheckDBBehindSnapshot: the consistent index is below the WAL's snapshot index and no
	// snap/<index>.snap.db is there to recover the backend from.
	CheckDBBehindSnapshot Check = "db/behind-snapshot"
)

// CamelCase turns the check id into a word usable as a Kubernetes condition or event reason
// ("db/behind-snapshot" → "DbBehindSnapshot"), as every rule id becomes one.
func (c Check) CamelCase() string { return ruleid.ID(c).CamelCase() }

// Report is what Inspect found.
type Report struct {
	State State
	// Check and Reason say, for Corrupt, which check failed and what exactly (file and error).
	Check  Check
	Reason string
	// Notes are what etcd will do at start with Valid data (repair a torn WAL tail, recover
	// the backend from a snapshot database).
	Notes []string

	// MemberID and ClusterID come from the WAL metadata record; a Corrupt report has them
	// when its WAL was read (the backend failed), so the member whose data is lost is known.
	MemberID, ClusterID uint64
	// SnapshotIndex is the newest WAL snapshot etcd would start from (0: none yet).
	SnapshotIndex uint64
	// CommitIndex is the last HardState's commit; LastIndex the last entry's index.
	CommitIndex, LastIndex uint64
	// WALFiles counts the *.wal files.
	WALFiles int

	// ConsistentIndex and Term are the backend's (meta bucket), DBSize its file's bytes.
	ConsistentIndex, Term uint64
	DBSize                int64
	// StorageVersion is the backend's meta/storageVersion ("" before etcd 3.6 wrote one).
	StorageVersion string
}

// corruptError carries a verdict through the checks; every other error is transient.
type corruptError struct {
	check  Check
	reason string
}

func (e *corruptError) Error() string { return fmt.Sprintf("%s: %s", e.check, e.reason) }

func corrupt(check Check, format string, args ...any) error {
	return &corruptError{check: check, reason: fmt.Sprintf(format, args...)}
}

// Inspect judges the data dir dir (etcd's --data-dir) as etcd would at start; see the package
// documentation for the checks and for which failures are errors rather than Corrupt. An
// error means: no verdict, try again later; never move the data aside because of it.
func Inspect(dir string) (Report, error) {
	r, err := inspect(dir)
	if err != nil || r.State != Corrupt {
		return r, err
	}
	// A verdict that moves data aside has to be reached twice: a file replaced or renamed
	// between two reads must not look like damage.
	again, err := inspect(dir)
	if err != nil {
		return Report{}, err
	}
	if again.State != r.State || again.Check != r.Check || again.Reason != r.Reason {
		return Report{}, fmt.Errorf("data dir %s changed while inspected: first %s (%s), then %s (%s)", dir, r.State, r.Reason, again.State, again.Reason)
	}
	return r, nil
}

// HoldsMemberData says whether the data dir dir holds member data: a file anywhere below its
// member directory. It is the one rule for "empty": Inspect reports Empty exactly when it is
// false, and a restore or a seed writes only where it is false, so a data dir the recovery
// counts as proven empty is never one a restore then refuses (a member directory of empty
// directories is both).
func HoldsMemberData(dir string) (bool, error) {
	empty, err := holdsNoFile(etcddatadir.ToMemberDir(dir))
	return !empty, err
}

func inspect(dir string) (Report, error) {
	holds, err := HoldsMemberData(dir)
	if err != nil {
		return Report{}, err
	}
	if !holds {
		return Report{State: Empty}, nil
	}
	r, err := inspectMember(dir)
	var c *corruptError
	if errors.As(err, &c) {
		r.State, r.Check, r.Reason, r.Notes = Corrupt, c.check, c.reason, nil
		return r, nil
	}
	if err != nil {
		return Report{}, err
	}
	r.State = Valid
	return r, nil
}

// holdsNoFile tells whether dir is missing or holds only (empty) directories.
func holdsNoFile(dir string) (bool, error) {
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if !info.IsDir() {
		return false, fmt.Errorf("%s is a %s, not a directory", dir, kind(info.Mode()))
	}
	found := errors.New("found a file")
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return found
		}
		return nil
	})
	if errors.Is(err, found) {
		return false, nil
	}
	return err == nil, err
}

// inspectMember judges a member directory that holds files. The Report it returns with a
// verdict keeps what was read before it (the member and cluster IDs once the WAL was read).
func inspectMember(dir string) (Report, error) {
	walDir := etcddatadir.ToWALDir(dir)
	names, err := walNames(walDir)
	if err != nil {
		return Report{}, err
	}
	if len(names) == 0 {
		return Report{}, corrupt(CheckWALMissing, "the member directory holds files but %s holds no WAL file", walDir)
	}
	// The backend is opened first and stays open (bbolt's shared lock held) while the WAL is
	// read: an etcd still running on this dir holds the exclusive lock, so it is caught
	// before its writes are read as damage, and none can start meanwhile. A backend that is
	// missing or that bbolt refuses is no running etcd's: its verdict waits for the WAL's IDs.
	db, dbErr := openDB(etcddatadir.ToBackendFileName(dir))
	var c *corruptError
	if dbErr != nil && !errors.As(dbErr, &c) {
		return Report{}, dbErr
	}
	defer db.close()

	w, err := readWAL(walDir, names)
	if err != nil {
		return Report{}, err
	}
	r := Report{
		MemberID: w.memberID, ClusterID: w.clusterID,
		SnapshotIndex: w.snapshotIndex, CommitIndex: w.commit, LastIndex: w.lastIndex,
		WALFiles: len(names), Notes: w.notes,
	}
	if dbErr != nil {
		return r, dbErr
	}

	facts, err := db.read()
	r.DBSize = facts.size
	if err != nil {
		return r, err
	}
	r.ConsistentIndex, r.Term, r.StorageVersion = facts.consistentIndex, facts.term, facts.storageVersion
	if facts.note != "" {
		r.Notes = append(r.Notes, facts.note)
	}
	note, err := backendReachesSnapshot(dir, facts.consistentIndex, w.snapshotIndex)
	if err != nil {
		return r, err
	}
	if note != "" {
		r.Notes = append(r.Notes, note)
	}
	return r, nil
}

// kind names a file's type for messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	default:
		return "special file (" + m.Type().String() + ")"
	}
}
