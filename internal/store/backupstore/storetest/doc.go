// Package storetest is the behaviour every backupstore provider must have, run against each
// (Local in a temp dir, S3 against a real S3 server in test/s3server).
package storetest
