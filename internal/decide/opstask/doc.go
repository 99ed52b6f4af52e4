// Package opstask decides the next step of an etcd-druid EtcdOpsTask: an on-demand full or delta
// snapshot, carried out by the leading member-agent's backup loop, which the operator asks on the
// snapshot Lease of the kind (internal/contract/memberlease) and which records there the request it
// answered. Decide is pure: a function of what the controller observed (the task, its Etcd, the
// Lease, the namespace's other tasks, the time), one named rule per answer; NextStatus is the
// status the decision leaves (state, lastOperation, lastErrors, as etcd-druid's).
//
// The life of a task, etcd-druid's states: no state → Pending (accepted) → InProgress (admitted:
// the Etcd exists, has a backup store, and no other task of it runs) or Rejected; InProgress →
// Succeeded when the Lease records the request handled, Failed when it is not by the timeout
// (timeoutSecondsFull or timeoutSecondsDelta from startedAt, etcd-druid's defaults when unset) or
// the Etcd or its store went away. A finished task is deleted ttlSecondsAfterFinished after it
// finished. The controller that carries the decisions out is internal/operator/controller/opstask.
package opstask
