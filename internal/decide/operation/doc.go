// Package operation is the one definition of "an operation is in flight" on an Etcd, and the
// one mechanism by which the controllers that change its members exclude each other.
//
// An operation is in flight while its condition on the Etcd's status is True. Each condition has
// one owner (internal/operator/controller/status's writers): it sets the condition before its first
// step, through the status patch with an optimistic lock, and clears it when the operation is
// over. Every other controller reads the same conditions through In and waits, each with a named
// rule of its planner, while an operation not its own is in flight:
//
//	condition                  kind             held by                 released when
//	ScaleOperationInProgress   scale            membership controller   the members match spec.replicas
//	RecoveryInProgress         recovery         recovery controller     the restored cluster leads, or the restore is called off
//	DefragmentationInProgress  defragmentation  defragmentation ctrl.   the member's defragmentation returns (or times out)
//	UpdateStrategyHeld         strategy-hold    Etcd reconciler         the StatefulSet is handed to RollingUpdate
//
// A rollout holds no condition: it is in flight while a member pod is not at the StatefulSet's
// update revision or is terminating (RolloutInFlight), which every controller sees in the
// objects themselves. Pure: no I/O, no clock.
package operation
