// Package memberaccess is how the controllers reach an Etcd's members: which objects are the
// Etcd's and its members' and the reads of them they share (objects.go), the member pods to dial
// (targets.go), the client key pair to dial them with (Access, clienttls.go), and the database
// sizes the quota check asks for (dbsizes.go). It imports no controller: every controller, the
// operator and the `plan` command use it alike.
package memberaccess
