// Package backupstore is the object store backups go to: a small interface (Put verified by
// size and SHA-256, Get that verifies on read, Stat, List by prefix, Delete) with two providers,
// S3 (AWS and S3-compatible endpoints, through minio-go) and Local (a directory on a volume).
// A store is built from an Etcd's spec.backup.store and the data of the Secret it names, with
// etcd-druid's key names, so etcd-druid's backup Secrets work unchanged.
//
// Keys are relative to the store's prefix (spec.backup.store.prefix); the store adds it.
package backupstore
