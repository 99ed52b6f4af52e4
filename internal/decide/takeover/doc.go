// Package takeover decides whether etcd-conductor may act on an Etcd that etcd-druid manages.
// Druid and etcd-conductor read the same Etcd objects (druid's API), and druid's objects for an
// Etcd are controlled by that Etcd as etcd-conductor's are: without this check every controller
// would take druid's StatefulSet, ConfigMap, Services and Leases for its own, rewrite them to its
// rendering (a peer Service that no longer selects druid's pods takes their DNS names away) and
// scale or roll druid's members. Until an in-place switch exists (docs/design/druid-takeover.md,
// issue #41), an Etcd druid has reconciled is left as it is, by every controller. Pure: no I/O.
package takeover
