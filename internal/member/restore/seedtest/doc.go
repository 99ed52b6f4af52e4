// Package seedtest joins a learner seeded from a full snapshot to a running etcdtest cluster, as
// the member-agent's init step seeds one (internal/member/restore.Seed), optionally from a planted
// snapshot whose data is not the cluster's: for the tests of what the operator does with a seeded
// learner (the membership controller's keyspace check, the integration tests). Only tests import
// it.
package seedtest
