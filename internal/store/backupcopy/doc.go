// Package backupcopy copies the backups of one store to another, as an EtcdCopyBackupsTask orders:
// the snapshots (etcd-backup-restore's v2/ layout) and etcd-conductor's records beside them, each
// object streamed (never held in memory), verified by reading it back (size and SHA-256), and
// skipped when the target already holds it, so a copy that stopped half-way finishes on the next
// run.
//
// Select (select.go) is pure: which objects, under which target keys, in which order. It picks full
// snapshots and their deltas per backup, bounded by maxBackups and maxBackupAge as
// etcd-backup-restore's copy command reads them, and orders them by revision with each full
// snapshot right after its record, so a target a crash left half-copied restores to a gap-free
// older state; ".final" is dropped from a name, and the source's store claim is left behind. Run
// (copy.go) does the I/O, retrying transient errors; Limits bounds the largest object it copies,
// and Permanent tells an error that fails the task from one worth another try.
package backupcopy
