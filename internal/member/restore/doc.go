// Package restore rebuilds one member's data directory from a backup chain (internal/contract/snapshot):
// the full snapshot is verified and the deltas replayed onto it through etcd's own storage layer
// (replay.go), in the source's revisions, then etcd's own restore (etcdutl's snapshot library)
// writes it as the member's data under its real name, peer URL and a new cluster token (DEP-01,
// "Recovering an etcd cluster from failure of majority of members": restore a single-member
// cluster, apply the incremental snapshots, then add the other members).
//
// A restore is exact or it says what it lacks. Every object is verified (the store's checksum,
// the full snapshot's SHA-256 trailer, each delta's own checksum); the restored keyspace is
// checked against what the chain records (revision, key count and the writer's digest of keys and
// values) before the member may start, and a mismatch is an error. A missing, unreadable or
// corrupt delta ends the replay at the last good revision and the Result names the revisions
// that are not restored: the data is then older than the backup's end, which is better than no
// cluster, but never hidden. Reads that fail for a transient reason are retried.
package restore
