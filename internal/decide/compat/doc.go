// Package compat says which of etcd-druid's Etcd fields an Etcd sets that etcd-conductor accepts
// but does not act on, and why (Ignored, one reason per group of fields). It is a pure function of
// the spec, so the Etcd reconciler's FieldsIgnored Event, the table in docs/etcd.md and the tests
// agree.
package compat
