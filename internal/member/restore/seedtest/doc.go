// Package seedtest joins a learner seeded from a full snapshot to a running etcdtest cluster, as
// the member-agent's init step seeds one (internal/member/restore.Seed), optionally from a planted
// snapshot: for the tests of what the operator does with a seeded learner.
package seedtest
