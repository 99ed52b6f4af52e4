// Package operation is the one definition of "an operation is in flight" on an Etcd, and the one
// mechanism by which the controllers that change its members exclude each other: two operations at
// once could each take a member away and together cost the quorum.
//
// An operation is in flight while its condition on the Etcd's status is True. Each condition has
// one owner (its Writer in internal/operator/etcdstatus): it sets the condition before its first
// step, through the status patch with an optimistic lock, and clears it when the operation is over.
// Every other controller reads the same conditions through Of (In for a bare list of conditions)
// and waits, each with a named rule of its planner, while an operation not its own is in flight:
//
//	condition                  kind             held by                released when
//	ScaleOperationInProgress   scale            membership controller  the members match
//	                                                                   spec.replicas
//	RecoveryInProgress         recovery         recovery controller    the restored member leads, or
//	                                                                   the restore is called off
//	DefragmentationInProgress  defragmentation  defragmentation ctrl.  the member's defragmentation
//	                                                                   returns (or times out)
//	UpdateStrategyHeld         strategy-hold    Etcd reconciler        the StatefulSet is handed to
//	                                                                   RollingUpdate
//
// A rollout holds no condition: it is in flight while a member pod is not at the StatefulSet's
// update revision or is terminating (RolloutInFlight), which every controller sees in the objects
// themselves.
//
// Holds is that table in code: a new row there is all it takes for every planner to wait on one
// more operation, and for the plan command, the Events and the wait metrics to name it.
// WaitRule(kind) is the rule id every planner waits under, wait/operation-in-flight/<kind>, the
// same in each; IsWaitRule tells such a wait from a step of the waiting controller's own operation.
// How the operations are held and released, controller by controller, is in docs/architecture.md,
// "Operations exclude each other".
//
// Pure: no I/O, no clock.
package operation
