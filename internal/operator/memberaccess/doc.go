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
// Cluster (cluster.go) is the one member API: an Etcd's members as one caller reaches them (the
// pool's connections under one PoolKey, one key pair, the pods dialled), with the verbs the
// planners name: statuses, move leader, add learner, promote, remove, update peer URLs, downgrade
// (each order through the leader of the status the caller decided on), defragment, linearizable
// reads. Pool is the one interface over the connection pool, and the etcdclient types the
// controllers need are spelled here, so that on the manager's side only this package imports
// etcdclient (test/structure checks it). A controller builds one with NewCluster from the targets
// and key pair it chose; Access.Reach builds one of every labelled member pod with the key pair
// read fresh, for the Etcd reconciler.
package memberaccess
