// Package storetest is the behaviour every backupstore provider must have (Run), run against each:
// Local in a temp dir, S3 against a real S3 server in test/s3server. Flaky wraps a real store so
// that its first calls fail, for the tests of what retries a transient failure. Only tests import
// it.
package storetest
