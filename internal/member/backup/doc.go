// Package backup is the member-agent's backup loop: on the member that leads the etcd cluster it
// takes full snapshots (Maintenance.Snapshot) on a cron schedule and on demand, delta snapshots
// (the watch events since the last snapshot) every deltaSnapshotPeriod, uploads and verifies
// them (internal/store/backupstore), collects old ones (internal/contract/snapshot) and records the latest
// revision and time in the full and delta snapshot Leases, as etcd-druid's sidecar does.
//
// Only the leader writes. A member that stops leading mid-snapshot may still finish an upload;
// that object is a faithful copy of etcd's history (named by the revisions it holds, written
// whole or not at all), so at worst it duplicates what the new leader writes. What it may not do
// is move the Leases: before each Lease update the agent checks that its member still leads in
// the same raft term, and the update itself is conditional on the Lease's resourceVersion and
// never lowers the recorded revision.
package backup
