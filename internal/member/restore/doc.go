// Package restore rebuilds one member's data directory from a backup chain
// (internal/contract/snapshot): the full snapshot is verified (its SHA-256 trailer, bbolt's meta
// pages and consistency) and the deltas replayed onto it through etcd's own storage layer
// (replay.go: mvcc without a server, so one source revision is one revision, nothing expires and no
// size limit applies), then etcd's own restore (etcdutl's snapshot library) writes it as the
// member's data under its real name, peer URL and a new cluster token, its revision bumped (by 1e9
// by default) and every revision up to it marked compacted (DEP-01, "Recovering an etcd cluster
// from failure of majority of members": restore a single-member cluster, apply the incremental
// snapshots, then add the other members).
//
// A restore is exact or it says what it lacks. Every object is verified (the store's checksum, the
// full snapshot's SHA-256 trailer, each delta's own checksum); the restored keyspace is checked
// against what the chain records (revision, key count and the writer's digest of keys and values)
// before the member may start, and a mismatch is an error. Only verified damage ends a chain early:
// a gap in the chain, or a delta that is corrupt or not what its name says, ends the replay at the
// last good revision, and the Result names the revisions that are not restored: the data is then
// older than the backup's end, which is better than no cluster, but never hidden. A read that fails
// for a transient reason is retried; an object the store still does not send fails the restore,
// which is tried again whole. FromStore (store.go) restores from the latest chain in a store the
// Etcd owns, passing over a full snapshot that cannot be restored for the one before it; a volume
// too small for it is refused before anything is read (space.go).
//
// Seed (seed.go) prepares a joining learner's data dir from the latest full snapshot
// (internal/decide/seeding decides whether): the database plus a WAL and raft snapshot record at
// its consistent index and term, under the learner's member ID and the running cluster's ID, the
// one form in which etcd resumes from it instead of replacing it with the leader's snapshot.
package restore
