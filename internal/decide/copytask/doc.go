// Package copytask decides the next step of an etcd-druid EtcdCopyBackupsTask: wait for the
// source's final full snapshot, copy the backups (internal/store/backupcopy, run by the
// controller), or finish as Succeeded or Failed. Pure: Plan is a function of what the controller
// observed (the task, whether its stores can be opened, the source's newest full snapshot, the
// outcome of a copy it just ran, the time); each answer comes from one named rule in one ordered
// list, and NextStatus is the status a decision leaves (conditions, lastError and
// observedGeneration, as etcd-druid's). Stores that cannot be opened (provider, container, Secret),
// or a source that is the target, fail the task; a copy's permanent error fails it, a transient one
// is retried. The controller that carries the decisions out is
// internal/operator/controller/copytask.
//
// The life of a task, as etcd-druid's (whose copy Job ends Complete or Failed): no condition while
// it waits or copies; Succeeded or Failed, True, once finished, and then nothing more is done (a
// finished task is neither run again nor deleted: etcd-druid sets no TTL on it). A copy that failed
// on a transient store error is tried again, with status.lastError saying why, and skips what the
// previous try copied.
//
// waitForFinalSnapshot differs from etcd-druid's on purpose. There etcd-backup-restore in the
// source cluster's pods takes a full snapshot named ".final" as it shuts down, and the copy waits
// for it. etcd-conductor's members take no snapshot at shutdown, so the wait ends at a full
// snapshot taken at or after the task's creation (stop writing, then ask for one with an
// EtcdOpsTask), or at a ".final" one (a store etcd-backup-restore wrote). As in etcd-druid, a wait
// that times out copies anyway, and no timeout waits as long as it takes.
package copytask
