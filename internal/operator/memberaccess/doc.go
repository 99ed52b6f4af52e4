// Package memberaccess is how the controllers reach an Etcd's members, shared by every controller
// that talks to them and by the plan command. It imports no controller: every controller, the
// operator and the plan command use it alike.
//
// It holds which objects are the Etcd's and its members' and the reads of them the controllers
// share (objects.go: the owning Etcd, the member pods, the member Leases; EtcdForPod in watch.go
// maps a member pod to its Etcd for the watches), the member pods to dial and the pool's cluster
// key (targets.go), and Access, which internal/operator builds once and hands to every controller;
// a controller given none (a test) builds its own.
//
// Access hands out the client key pair to dial the members with (clienttls.go): the Etcd's own,
// from the Secrets it names, built and verified once per set of Secrets at their resourceVersions
// and kept until a certificate expires or it goes an hour unused; else the operator-wide pair, read
// from its files at each use. ClientTLS reads the Secrets through a cache (secretcache.go, ten
// minutes in the manager), for the controllers that ask the members on every poll (OnDelete,
// membership), which drop them with ForgetSecrets when the members refuse them; FreshClientTLS
// reads them from the apiserver each time, for those that reach the members seldom or whose
// members' silence says nothing about the key pair (defragmentation, recovery, the quota check).
// Which scheme the members serve clients on follows the running template's transport stage
// (internal/decide/transport).
//
// Calls (calls.go) are the Etcd reconciler's questions and orders to the members: their status,
// etcd's downgrade calls and a leadership move; DBSizes (dbsizes.go) the members' database sizes
// for the quota check.
package memberaccess
