// Package seeding decides whether a member joining a running cluster as a learner starts from the
// latest full snapshot of its backup store (issue #28, DEP-01 "restores only the latest full
// snapshot") instead of an empty data dir. It does no I/O and reads no clock.
//
// Why the rules are what they are (measured and read in etcd's source, docs/benchmarks.md, "Seeding
// a joining member"):
//
//   - etcd's leader replicates by the follower's raft log, not by its database: a member whose data
//     dir holds only a database (no WAL) has log index 0 and is sent the leader's whole database as
//     a raft snapshot, which replaces the seed. A seed is useful only with a WAL and raft snapshot
//     record at the database's consistent index and term, under the member ID the learner was added
//     with and the running cluster's ID (internal/member/restore, Seed).
//   - The leader keeps only the last --snapshot-catchup-entries entries (5000 by default; it
//     compacts every 100 applied entries, etcd 3.6/3.7 server.go compactRaftLog). A seed further
//     behind is replaced by the leader's snapshot all the same (safe, but the download was for
//     nothing), so it is not fetched.
//   - Raft trusts a follower's log up to its commit index: a seed from another raft history
//     (another cluster, or this Etcd before a restore, which starts a new cluster ID) would be
//     taken as this cluster's entries. Only a full snapshot whose recorded origin names the running
//     cluster's ID (and this Etcd) is used; one without a record is not.
//
// A seeded learner still catches up from the leader and is promoted only through the membership
// controller's catch-up gate, as an empty one.
//
// Decide runs named rules in order, each but the last a reason not to seed: only a member joining
// with an empty data dir, only with a backup store and no data kept aside, only from a full
// snapshot whose recorded origin is the running cluster (cluster ID, and Etcd UID when known),
// never one ahead of the leader, and only within half of the leader's --snapshot-catchup-entries
// behind it. The member-agent's init step (internal/member/agent, seed.go) asks twice: before the
// download, when revisions bound the distance, and after, when the database's consistent index
// gives it exactly; any doubt or failure joins empty.
package seeding
