// Package agent is the code of every etcd member pod beside etcd itself, run by the one binary as
// `member-agent` (the sidecar) and `member-agent init` (the init step).
//
// The sidecar (agent.go) asks its own member for its status over mutual TLS and, while the member
// answers, renews the member's Lease with the member ID, cluster ID and role. The Lease going stale
// is the signal that the member is gone; the agent never creates a Lease and never touches another
// pod's. The same process runs the backup loop (internal/member/backup), which acts only on the
// leading member.
//
// The init step (initstep.go) is the per-member start decision of DEP-01's member scenarios
// (DecideStart, start.go, pure): start from the data dir as it is, join the running cluster,
// bootstrap, wait, move the data aside (never deleting it), or restore. It reports the decision on
// the member Lease with its pod UID and what it found in the data dir
// (etcd-conductor.io/start-report) and what is kept aside next to it
// (etcd-conductor.io/data-aside); restores when the Etcd's status.recovery orders a restore of its
// own pod incarnation (internal/member/restore); seeds a joining learner from the latest full
// snapshot when internal/decide/seeding says so (seed.go; any doubt or failure joins empty); and
// writes etcd's configuration file. ClientFiles (clientfiles.go) is how both reach members: the
// client material's mounted files, or plaintext. What either writes on a Lease is
// internal/contract/memberlease's.
package agent
