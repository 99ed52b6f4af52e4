// Package etcdtest starts real etcd clusters with mutual TLS on loopback addresses, from the
// binaries in bin/ (ETCD_CONDUCTOR_BIN_DIR), for tests of any package (Start). Members listen on
// distinct 127.0.0.x addresses and carry certificates with the SANs a member pod of the Etcd would
// have, so clients verify them with the same server names they use in a cluster. Beside it: Mute
// (mute.go) cuts one member off from its peers, one way, as a half-broken network does; PlantValue
// (plant.go) changes a value in a member's database as a snapshot planted in the backup bucket
// would hold it. Only tests and test helpers import it.
package etcdtest
