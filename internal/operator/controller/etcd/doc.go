// Package etcd holds the Etcd reconciler: it writes the desired state of every object an Etcd owns
// (internal/operator/resources builds them) and carries out the changes that start from what runs:
// it writes the member TLS Secret, makes etcd's downgrade calls, moves leadership and recreates
// the StatefulSet without its pods for a volume change. It never deletes pods: under
// RollingUpdate the StatefulSet controller replaces them, under OnDelete the ondelete controller.
//
// A pass leaves an Etcd etcd-druid manages alone (internal/decide/takeover), asks
// internal/decide/specgate whether the spec is applied now, validates the spec and the Secrets it
// names, and writes every owned object, the member NetworkPolicy last; the StatefulSet's update strategy comes from the
// feature gate through internal/decide/updatestrategy. Besides, per file: etcd-druid's component
// protection annotation mirrored onto every owned object for the chart's admission policy
// (protection.go); the snapshot Leases and the backup store's checks (backup.go); a lowered quota
// refused below a member's database size (quota.go); members held back for an Etcd that joins an
// existing cluster (existingcluster.go); the FieldsIgnored Event (ignored.go, from
// internal/decide/compat); and the decisions that start from what runs, each carried out here:
// moving members to TLS (transport.go, internal/decide/transport), etcd version changes and
// downgrades (version.go, internal/decide/versionchange), TLS rotation into the member TLS Secret
// (trust.go, internal/decide/trustchange) and volume changes (volume.go,
// internal/decide/volumechange). What it looks at again without an event, and how soon, is
// recheck.go; which status changes wake it (the PodDisruptionBudget's health among them) is
// register.go.
package etcd
