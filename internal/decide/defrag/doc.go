// Package defrag decides which member of an etcd cluster to defragment next during a scheduled
// defragmentation run. It is pure: Plan(Observed) Decision, no I/O and no clock, one named rule
// per decision, so the controller that runs it stays thin and the rules are tested exhaustively.
//
// Defragmentation rewrites a member's backend file and blocks that member's reads and writes
// while it runs (/work/shared/notes/etcd-membership.md). So a run goes one member at a time,
// followers first and the leader last (a blocked leader stalls every write), and only while the
// cluster could lose the blocked member and still have a quorum of healthy voters.
package defrag
