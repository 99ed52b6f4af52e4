// Package backup is the member-agent's backup loop: on the member that leads the etcd cluster it
// takes full snapshots (Maintenance.Snapshot) on a cron schedule and on demand, delta snapshots
// (the watch events since the last snapshot) every deltaSnapshotPeriod, uploads and verifies them
// (internal/store/backupstore), collects old ones (internal/contract/snapshot) and records the
// latest revision and time in the full and delta snapshot Leases, as etcd-druid's sidecar does.
//
// Only the leader writes. A member that stops leading mid-snapshot may still finish an upload; that
// object is a faithful copy of etcd's history (named by the revisions it holds, written whole or
// not at all), so at worst it duplicates what the new leader writes. What it may not do is move the
// Leases: before each Lease update the agent checks that its member still leads in the same raft
// term, and the update itself is conditional on the Lease's resourceVersion and never lowers the
// recorded revision.
//
// Decide (decide.go) is the loop's pure step: a full snapshot on schedule or on demand, a delta per
// period or on demand, garbage collection. UploadFull and UploadDelta (upload.go) take and upload
// them; BuildDelta (delta.go) reads the events of a delta and carries its origin and the keyspace
// digest from delta to delta, which a restore checks its result against. Claim (owner.go) holds the
// store's prefix to one Etcd, so two Etcds never collect, chain or restore each other's snapshots.
// The Lease writes are in leases.go, the loop in runner.go and its metrics in metrics.go.
package backup
