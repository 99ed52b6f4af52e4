// Package etcd holds the Etcd reconciler: it writes the desired state of every object an Etcd owns
// (internal/operator/resources builds them) and carries out the changes that start from what runs:
// it writes the member TLS Secret, makes etcd's downgrade calls, moves leadership and recreates
// the StatefulSet without its pods for a volume change. It never deletes pods: under
// RollingUpdate the StatefulSet controller replaces them, under OnDelete the ondelete controller.
//
// Reconcile is the table of contents: an Etcd etcd-druid manages is left alone
// (internal/decide/takeover), internal/decide/specgate says whether the spec is applied now; then
// one pass observes once (observe.go: the StatefulSet, what each change starts from, the members
// asked at most once and only when a change needs their word), decides once and purely
// (internal/decide/render, which `plan` prints too), records (the changes' conditions, the input's
// problems: with any, nothing is written) and acts, step by step in one table, the member
// NetworkPolicy last; the requeue is the soonest recheck asked. Per file: what each part observes
// and how it is carried out: moving members to TLS (transport.go, internal/decide/transport), etcd
// version changes and downgrades (version.go, internal/decide/versionchange), TLS rotation into
// the member TLS Secret (trust.go, internal/decide/trustchange), volume changes and the changes'
// conditions (volume.go, internal/decide/volumechange); besides, etcd-druid's component
// protection annotation mirrored onto every owned object for the chart's admission policy
// (protection.go); the snapshot Leases and the backup store's checks (backup.go); a lowered quota
// refused below a member's database size (quota.go); members held back for an Etcd that joins an
// existing cluster (existingcluster.go); the FieldsIgnored Event (ignored.go, from
// internal/decide/compat). Which status changes wake it (the PodDisruptionBudget's health among
// them) is register.go.
package etcd
