// Package etcdtest starts real etcd clusters with mutual TLS on loopback addresses, from the
// binaries in bin/ (ETCD_CONDUCTOR_BIN_DIR), for tests of any package. Members listen on
// distinct 127.0.0.x addresses and carry certificates with the SANs a member pod of the Etcd
// would have, so clients verify them with the same server names they use in a cluster.
package etcdtest
