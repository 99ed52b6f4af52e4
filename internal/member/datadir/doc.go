// Package datadir judges an etcd member's data dir the way etcd itself would at start, and keeps
// data that is set aside (issue 24, item 5). It never writes into a data dir: the WAL is opened
// read-only with etcd's own wal package and the backend read-only with bbolt.
//
// # Verdicts
//
// Inspect returns a Report whose State is
//
//   - Empty: no member directory, or one that holds no file (only empty directories).
//     HoldsMemberData is that rule alone, the one the init step, the restore and the seed all go
//     by, so a data dir the recovery counts as proven empty is never one a restore then refuses.
//   - Valid: etcd would start from it. The WAL reads with etcd's wal package from the newest
//     snapshot etcd would pick, its metadata names the member and the cluster, and the backend
//     opens with bbolt and holds a consistent index etcd can start from.
//   - Corrupt: etcd's or bbolt's own checks refuse the data, or the WAL or the backend is missing
//     from a member directory that holds files. Report.Check names the check that failed (a stable
//     id, see Check) and Report.Reason says what failed, with the file.
//
// # What is checked, as etcd does it (etcd v3.7, server/etcdserver/bootstrap.go)
//
//   - The newest snapshot: wal.ValidSnapshotEntries over the WAL directory, the last entry (as
//     recoverSnapshot does; etcd no longer reads .snap files at start).
//   - The WAL file names: none missing from the sequence (etcd purges only the oldest; its
//     selectWALFiles checks the files from the snapshot's on).
//   - The WAL files from the one holding that snapshot: wal.OpenForRead and WAL.ReadAll
//     (openWALFromSnapshot uses wal.Open and ReadAll; OpenForRead is the same reader without the
//     write lock). ReadAll checks every record's CRC and the CRC chain between files, that the
//     metadata never changes, that the snapshot record is there with its term, and the entries'
//     indexes.
//   - A torn last record: etcd repairs it (wal.Repair truncates the last file at its last whole
//     record) and starts, so it is Valid with a note. Only the last file is repaired: a short or
//     torn record in an earlier file makes etcd give up, so it is Corrupt. Each file is decoded
//     once more on its own (etcd's decoder, the loop wal.Repair runs) to see where a short record
//     lies, which a read-only ReadAll does not say.
//   - The metadata record (etcdserverpb.Metadata) must name a member: raft refuses ID 0.
//   - The last HardState's commit must not lie beyond the last entry (raft's loadState panics:
//     "state.commit is out of range").
//   - The backend member/snap/db opens with bbolt read-only (bbolt checks the magic, version and
//     checksum of its two meta pages), is not shorter than its meta page says, and its meta bucket
//     gives the consistent index and term (schema.UnsafeReadConsistentIndex's keys and encoding).
//     Nothing else is read: the cost does not grow with the database.
//   - The consistent index must reach the WAL's snapshot index, or etcd must find
//     snap/<index>.snap.db to recover the backend from (recoverSnapshot, RecoverSnapshotBackend);
//     that file is then judged as the backend.
//
// A backend missing beside a WAL is Corrupt, although etcd would build a new one and replay a WAL
// that never took a snapshot into it: etcd creates the backend before the WAL, so a WAL without one
// is damage.
//
// Not judged: the storage version (a newer etcd's data is not corrupt), and that the consistent
// index is at most the HardState's commit (etcd's verify package checks it only when ETCD_VERIFY is
// set, at close: a commit-only HardState is written without fsync, so after a crash the backend may
// legitimately be ahead of it).
//
// # Transient failures
//
// Anything that is not a verdict on the data's content is returned as an error, never as Corrupt:
// the caller retries and never moves data aside because of it. Only these are verdicts
// (Report.Check names which):
//
//   - from etcd's wal package: wal.ErrCRCMismatch, ErrMetadataConflict, ErrSnapshotMismatch,
//     ErrSnapshotNotFound, ErrSliceOutOfRange, a protobuf decoding error, and a panic while
//     decoding (etcd would panic on the same bytes); a short or torn record in a WAL file that is
//     not the last;
//   - a WAL file missing from the sequence, or none holding the snapshot's index;
//   - WAL metadata that is missing, does not decode or names member 0; a HardState that commits
//     beyond the last entry;
//   - from bbolt: errors.ErrInvalid, ErrChecksum, ErrVersionMismatch and "file size too small",
//     each believed only when the file's first pages read again without an error (bbolt reports a
//     failed read of its meta pages as ErrInvalid too); a panic while reading the meta bucket,
//     unless it is a memory fault inside the file (an I/O error on a mapped page);
//   - a backend shorter than its meta page counts, a consistent index or term shorter than etcd's 8
//     bytes, a consistent index below the WAL snapshot's without the snapshot's database;
//   - the WAL (no *.wal file in member/wal) or the backend missing from a member directory that
//     holds files.
//
// Everything else is transient: permission denied, EIO and every other error from the operating
// system; a file vanishing between listing and opening it (ENOENT races); bbolt's lock not acquired
// within a second (another process, such as an etcd still running, holds the backend); a file of
// the wrong type (a directory where the backend is expected, a file where the member directory is:
// a misplaced mount is not damaged data); a WAL record of a type this etcd does not know (a newer
// etcd's WAL); any error not listed above. A Corrupt verdict is reached twice in a row before it is
// returned; two different answers are an error too.
//
// # Data set aside
//
// MoveAside renames a data dir to a sibling <dir>.aside-<UTC time> and never overwrites; ListAside
// lists those siblings with their time and size for status and metrics. Nothing here deletes data.
package datadir
