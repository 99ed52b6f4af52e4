// Package backupcopy copies the backups of one store to another, as an EtcdCopyBackupsTask
// orders: the snapshots (etcd-backup-restore's v2/ layout) and etcd-conductor's records beside
// them, each object streamed (never held in memory), verified by reading it back, and skipped
// when the target already holds it, so a copy that stopped half-way finishes on the next run.
//
// Select (select.go) is pure: which objects, under which target keys, in which order. Run
// (copy.go) does the I/O.
package backupcopy
