// Package etcdstatus is how every controller writes an Etcd's status and reads what the others
// wrote there: Patch, the one writing path, with the Writer that owns each field and condition
// type; SetCondition; the rollout lastOperation format; and the condition reason and member
// readiness more than one controller goes by. The status controller (internal/operator/controller/status)
// computes its fields and conditions itself and writes them through Patch like any other writer,
// so no controller needs to import another to share the status.
package etcdstatus
