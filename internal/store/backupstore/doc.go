// Package backupstore is the object store backups go to: a small interface (Put verified by size
// and SHA-256, Get that verifies on read, Stat, List by prefix, Delete) with two providers, S3 (AWS
// and S3-compatible endpoints, through minio-go; uploads in parts of PutPartSize, 16 MiB) and Local
// (a directory on a volume, every file opened through an os.Root of its boundary). A store is built
// from an Etcd's spec.backup.store and the data of the Secret it names, with etcd-druid's key
// names, so etcd-druid's backup Secrets work unchanged (config.go); Config.Location names which
// objects a configuration reaches.
//
// Keys are relative to the store's prefix (spec.backup.store.prefix); the store adds it.
//
// Flags (flags.go) is the one set of store flags the member-agent and the init step both parse and
// internal/operator/resources renders and copies to both, so a restore never reads another store
// than the backups went to. Retrying (retry.go) retries List, Stat and Get on transient errors with
// capped backoff, and Retry is the same loop for any other call (a Put that reopens its reader).
// Reach (reach.go) is the operator's allow-list of store locations (the OperatorConfiguration's
// backupStores: Local roots, S3 endpoints, https unless opted out), the one check of a Local root
// and an endpoint, which the members apply too.
package backupstore
