// Package defrag decides which member of an etcd cluster to defragment next during a scheduled
// defragmentation run. It is pure: Plan(Observed) Decision, no I/O and no clock, one named rule per
// decision, so the controller that runs it (internal/operator/controller/defrag) stays thin and the
// rules are tested exhaustively, properties included.
//
// Defragmentation rewrites a member's backend file and blocks that member's reads and writes while
// it runs. So a run goes one member at a time, followers first and the leader last (a blocked
// leader stalls every write), and only while the cluster could lose the blocked member and still
// have a quorum of healthy voters; a cluster without that headroom skips the run. A run waits while
// a rollout, a scale or another operation is in flight (package operation) and while voluntary
// disruptions wait for the backup (package backupgate, rule defrag/wait/backup-not-ready): the run
// waits, it is not skipped.
package defrag
