// Package etcdstatus is how every controller writes an Etcd's status and reads what the others
// wrote there. The rules every writer follows are in patch.go: Patch is the one writing path; each
// Writer owns a disjoint set of fields and condition types, and a write touching another's is
// refused; nothing is sent when nothing changed; and the lists several writers share (the
// conditions) are written under an optimistic lock, so no writer drops another's condition.
//
// Beside it: SetCondition and StampConditions (conditions.go); the rollout's lastOperation, its
// format and how its rule is read back (lastoperation.go); and what more than one controller goes
// by: the Ready condition's ReasonQuorumLost, the reasons of status.members and PodReady, a member
// pod's readiness as every count of ready members takes it. The status controller
// (internal/operator/controller/status) computes its fields and conditions itself and writes them
// through Patch like any other writer, so no controller needs to import another to share the
// status.
package etcdstatus
