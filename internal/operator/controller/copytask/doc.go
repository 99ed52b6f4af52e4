// Package copytask holds the EtcdCopyBackupsTask controller. Where etcd-druid starts a Job that
// runs etcd-backup-restore's copy command, the manager copies the objects itself: it reads a task,
// opens its source and target stores from their StoreSpecs and Secrets, asks the planner
// (internal/decide/copytask) for the next step, runs the copy (internal/store/backupcopy) when told
// to, asks the planner again with the outcome and records it (status as etcd-druid's, an Event, the
// log).
//
// A store is opened from a StoreSpec and its Secret through resources.StoreConfig, the one way from
// them to a backupstore.Config, and only where the operator's backupStores allow-list reaches
// (backupstore.Reach). The copies run off the reconcile (copies.go), at most as many at once as the
// controller's concurrentSyncs, each bounded by the largest object it may copy (backupcopy.Limits);
// nothing is kept on disk, and a copy started again skips what the target already holds.
package copytask
