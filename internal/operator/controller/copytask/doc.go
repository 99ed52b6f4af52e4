// Package copytask holds the EtcdCopyBackupsTask controller. Where etcd-druid starts a Job that
// runs etcd-backup-restore's copy command, the manager copies the objects itself: it reads a
// task, opens its source and target stores from their StoreSpecs and Secrets, asks the planner
// (internal/decide/copytask) for the next step, runs the copy (internal/store/backupcopy) when told to, asks
// the planner again with the outcome and records it (status as etcd-druid's, an Event, the log).
package copytask
