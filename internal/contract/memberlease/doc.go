// Package memberlease is the contract between the operator and the code that runs in its member
// pods (the member-agent sidecar, its `member-agent init` step and, on the leading member, its
// backup loop), carried on coordination.k8s.io Leases: the Lease names, the holderIdentity formats,
// the annotation keys and the formats of their values, with a Format and a Parse for each that has
// a structure. Both sides import this package and nothing else of each other's, so neither can
// change the wire format alone; keys and values are what running clusters hold and must stay byte
// for byte as they are.
//
// It imports only the standard library and API types: it is a vocabulary, not a client.
//
// # Who writes what, who reads it
//
// Member Leases are named as their etcd member: like their pod, or <prefix>-<pod> with
// spec.memberNamePrefix (internal/operator/resources.MemberNameOf, PodOfMember), one per member.
// The operator's Etcd controller creates them empty and sets leaseDurationSeconds; nothing here
// creates one. The snapshot Leases are etcd-druid's, "<etcd>-full-snap" and "<etcd>-delta-snap"
// (FullSnapshotLeaseName, DeltaSnapshotLeaseName), created empty by the same controller while
// backups are configured.
//
// Each key below: who writes it, who reads it, and when it is removed. On a member Lease:
//
//   - holderIdentity and renewTime (HolderIdentity): written by the sidecar at every renewal while
//     its member answers; read by roles (through decision: the OnDelete controller, plan), status
//     (members[]) and membership (the cluster ID majority); never removed: it stops being renewed
//     when the member does not answer, and goes stale.
//   - start-decision: written by the init step at every decision; read by recovery (shown in a
//     voter's evidence); never removed: each decision overwrites it.
//   - start-report (StartReport): written by the init step at every decision that judged the data
//     dir, with noSpace when a restore found its volume too small; read by recovery (a voter proven
//     without data, only for the pod incarnation that wrote it; noSpace only shown in
//     RecoveryInProgress and an Event; rule wait/bootstrap-from-backup: a member of a new cluster
//     proven empty, awaiting a bootstrap from the backup); removed by the init step with a decision
//     that did not judge the data dir, noSpace by its next report.
//   - data-lost-member-id: written by the init step under rule wait/data-lost; read by membership
//     (it replaces exactly that member); removed by the init step's next other decision.
//   - data-aside (DataAside): written by the init step with every decision (listed at start and
//     after each move aside); read by status (status.dataAside, metrics), only reported, never
//     acted on; never removed: left as it was when the aside dirs cannot be listed.
//   - restore-from-backup: written by nobody now (operators before the order moved to
//     status.recovery); read by recovery, as a forgery: an Event; removed by the recovery
//     controller, at once.
//
// On the snapshot Leases, full-snap and delta-snap alike:
//
//   - holderIdentity (the revision), renewTime, snapshot-key, snapshot-size: written by the backup
//     loop on the leading member after each upload; read by status (the BackupReady conditions) and
//     the backup loop itself (the revision only goes up); never removed, and a lower revision is
//     refused.
//   - backup-error, backup-error-reason, backup-error-time: written by the backup loop on a
//     failure; read by status (BackupReady's reason and message); removed by the backup loop's next
//     success.
//
// On the full-snap Lease only:
//
//   - full-snapshot-requested: written by the operator: the Etcd controller (from the Etcd's
//     full-snapshot annotation), recovery (after a restore) and, as EtcdOpsTask/<name>/<uid>, the
//     EtcdOpsTask controller (an on-demand full snapshot); read by the backup loop (it takes a full
//     snapshot); never removed: a new value is a new request.
//   - full-snapshot-handled: written by the backup loop with the snapshot that answered a request;
//     read by the backup loop (request answered) and the EtcdOpsTask controller (task succeeded);
//     never removed.
//   - full-snapshot-from-etcd: written by the Etcd controller with each value it hands on; read by
//     the Etcd controller (a value is handed on once); never removed.
//
// On the delta-snap Lease only:
//
//   - delta-snapshot-requested: written by the EtcdOpsTask controller (an on-demand delta); read by
//     the backup loop (it takes a delta snapshot at once); never removed: a new value is a new
//     request.
//   - delta-snapshot-handled: written by the backup loop with the delta (or the record that nothing
//     changed) that answered a request; read by the backup loop (request answered) and the
//     EtcdOpsTask controller (task succeeded); never removed.
//
// # Trust
//
// Every member pod of a cluster writes Leases through the ServiceAccount all of them share (the
// chart's member Lease policy, where installed, narrows each pod to its own), and namespace users
// may be granted Lease write too. So what a Lease says is evidence the operator weighs, never an
// order: holderIdentity only counts while fresh and the members' own answers win over it
// (internal/decide/roles); a start report counts only for the pod incarnation it names, only in its
// canonical form (StartReport.Annotation: the pod UID first), and only while the chart's member
// report policy authenticates the init step's annotations (start report and decision, data-lost
// member ID, data aside: only the operator and the Lease's own pod, as itself, with a start report
// naming that pod's UID; internal/operator/reportauth checks it is installed); what is kept aside
// is only reported; a restore order is only ever read from the Etcd's status, which only the
// operator writes.
//
// # Timing
//
// DefaultRenewInterval is the sidecar's renewal period when its pod does not set one; timing on the
// operator's side that waits for a renewal allows for it. The pods the operator builds pass their
// own interval and a Lease duration of several intervals (internal/operator/resources).
package memberlease
