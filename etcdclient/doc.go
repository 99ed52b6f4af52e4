// Package etcdclient talks to the members of etcd clusters over mutual TLS (or plain HTTP, for an
// Etcd without client TLS), for the manager and the member pods alike. It keeps one long-lived gRPC
// connection per member, pooled per cluster (Pool, pool.go), so a steady-state reconcile performs
// no TLS handshake.
//
// Pool asks a cluster's members together: Query (each member's status and the member list),
// LeaderMemberList, LinearizableReads (who serves one, the readiness probe's own check), MoveLeader
// and Defragment (defrag.go). MemberConn (member.go) is one member's connection, as the
// member-agent dials its own member (DialMember): status (with storage version and downgrade
// state), the member list, learners added, promoted and removed, peer URLs updated, leadership
// moved, etcd's downgrade calls; and what the backup loop reads (snapshot.go): the revision, a full
// snapshot, the events of a delta, the keyspace digest.
package etcdclient
