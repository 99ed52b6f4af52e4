// Package snapshot names, parses and selects the backups of an etcd cluster in an object store, and
// holds the delta snapshot file format. It does no I/O: the member-agent takes and uploads
// snapshots (internal/member/backup), restore reads them back; both agree through this package.
//
// Objects follow etcd-backup-restore's layout, so a store written by one is legible to the other:
// "v2/Full-<startRev>-<endRev>-<unix>" holds a full database snapshot (Maintenance.Snapshot) at
// endRev, "v2/Incr-<startRev>-<endRev>-<unix>" the watch events of revisions startRev..endRev.
// Revisions are zero-padded to 8 digits and grow beyond that; the time is Unix seconds (UTC). A
// compressed object's name ends in its compression's suffix (".gz", ".Z", ".zlib"), and the full
// snapshot etcd-backup-restore takes as it shuts down ends in ".final" after that.
//
// Latest (select.go) is the chain a restore applies: the latest full snapshot and the deltas after
// it. GarbageCollect (gc.go) is which backups go, by named rules. The delta file format, its events
// and SHA-256 checksum, is delta.go; ReadDelta and ScanDelta read etcd-backup-restore's deltas too
// (brdelta.go); compression.go is the gzip, LZW and zlib streams. The records etcd-conductor keeps
// beside the snapshots (meta.go: who wrote a full snapshot and its keyspace digest, who owns the
// prefix) are outside the v2/ folder, so etcd-backup-restore never meets a name it does not know.
// The format is described in docs/backup-format.md.
package snapshot
