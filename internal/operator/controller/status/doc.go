// Package status holds the status controller: it computes an Etcd's members, conditions and replica
// counts from its StatefulSet, pods and member Leases, and writes them through etcdstatus.Patch as
// WriterStatus, like every other writer of the status.
//
// Compute is pure (compute.go): each condition is one function in its own file,
// condition_<type>.go, from the observation alone; status.dataAside comes from the member Leases'
// reports of data kept aside (aside.go), which are only reported, never acted on. The per-Etcd and
// per-member health gauges are computed from what was written (health.go, HealthOf, pure), the
// series registered on the registry passed in (metrics.go); each Etcd's series are replaced as a
// whole (series.go), so those of a member, condition or Etcd that went are deleted. The series are
// listed in docs/monitoring.md.
package status
