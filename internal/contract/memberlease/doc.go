// Package memberlease is the contract between the operator and the code that runs in its member
// pods (the member-agent sidecar, its `member-agent init` step and, on the leading member, its
// backup loop), carried on coordination.k8s.io Leases: the Lease names, the holderIdentity
// formats, the annotation keys and the formats of their values, with a Format and a Parse for
// each that has a structure. Both sides import this package and nothing else of each other's, so
// neither can change the wire format alone; keys and values are what running clusters hold and
// must stay byte for byte as they are.
//
// It imports only the standard library and API types: it is a vocabulary, not a client.
//
// # Who writes what, who reads it
//
// Member Leases are named as their etcd member: like their pod, or <prefix>-<pod> with
// spec.memberNamePrefix (internal/operator/resources.MemberNameOf, PodOfMember), one per member. The
// operator's Etcd controller creates them empty and sets leaseDurationSeconds; nothing here
// creates one. The snapshot Leases are etcd-druid's, "<etcd>-full-snap" and "<etcd>-delta-snap"
// (FullSnapshotLeaseName, DeltaSnapshotLeaseName), created empty by the same controller while
// backups are configured.
//
//	Lease          field or key                    written by                         read by                                           removed
//	member         holderIdentity, renewTime       sidecar, every renewal while its   roles (via decision: ondelete, plan), status      never; stops being renewed when the
//	               (HolderIdentity)                member answers                     (members[]), membership (cluster ID majority)     member does not answer, and goes stale
//	member         start-decision                  init step, every decision          recovery (shown in a voter's evidence)            never; each decision overwrites it
//	member         start-report (StartReport)      init step, every decision that     recovery (a voter proven without data, only for   by the init step with a decision that
//	                                               judged the data dir; with noSpace  the pod incarnation that wrote it; noSpace only    did not judge the data dir; noSpace
//	                                               when a restore found its volume    shown in RecoveryInProgress and an Event; rule     by its next report
//	                                               too small                          wait/bootstrap-from-backup: a member of a new
//	                                                                                  cluster proven empty, awaiting a bootstrap from
//	                                                                                  the backup)
//	member         data-lost-member-id             init step, rule wait/data-lost     membership (replaces exactly that member)         by the init step's next other decision
//	member         data-aside (DataAside)          init step, with every decision     status (status.dataAside, metrics); only          never; left as it was when the aside
//	                                               (listed at start and after each    reported, never acted on                          dirs cannot be listed
//	                                               move aside)
//	member         restore-from-backup             nobody now (operators before the   recovery, as a forgery: an Event                  by the recovery controller, at once
//	                                               order moved to status.recovery)
//	full-snap,     holderIdentity (revision),      backup loop on the leading         status (BackupReady conditions), the backup       never; a lower revision is refused
//	delta-snap     renewTime, snapshot-key,        member, after each upload          loop itself (the revision only goes up)
//	               snapshot-size
//	full-snap,     backup-error, -reason, -time    backup loop, on a failure          status (BackupReady reason and message)           by the backup loop's next success
//	delta-snap
//	full-snap      full-snapshot-requested         operator: the Etcd controller      backup loop (takes a full snapshot)               never; a new value is a new request
//	                                               (from the Etcd's full-snapshot
//	                                               annotation), recovery (after a
//	                                               restore)
//	full-snap      full-snapshot-requested         operator: the EtcdOpsTask          backup loop (takes a full snapshot)               never; a new value is a new request
//	               (EtcdOpsTask/<name>/<uid>)      controller (on-demand full)
//	full-snap      full-snapshot-handled           backup loop, with the snapshot     backup loop (request answered), the EtcdOpsTask   never
//	                                               that answered a request            controller (task succeeded)
//	full-snap      full-snapshot-from-etcd         operator: the Etcd controller,     the Etcd controller (a value is handed on once)   never
//	                                               with each value it hands on
//	delta-snap     delta-snapshot-requested        operator: the EtcdOpsTask          backup loop (takes a delta snapshot at once)      never; a new value is a new request
//	                                               controller (on-demand delta)
//	delta-snap     delta-snapshot-handled          backup loop, with the delta (or    backup loop (request answered), the EtcdOpsTask   never
//	                                               the record that nothing changed)   controller (task succeeded)
//	                                               that answered a request
//
// # Trust
//
// Every member pod of a cluster writes Leases through the ServiceAccount all of them share (the
// chart's member Lease policy, where installed, narrows each pod to its own), and namespace users
// may be granted Lease write too. So what a Lease says is evidence the
// operator weighs, never an order: holderIdentity only counts while fresh and the members' own
// answers win over it (internal/decide/roles); a start report counts only for the pod incarnation it
// names, only in its canonical form (StartReport.Annotation: the pod UID first), and only while
// the chart's member report policy authenticates the init step's annotations (start report and
// decision, data-lost member ID, data aside: only the operator and the Lease's own pod, as
// itself, with a start report naming that pod's UID; internal/operator/reportauth checks it is
// installed); what is kept aside is only reported; a restore order is only ever read from the
// Etcd's status, which only the operator writes.
//
// # Timing
//
// DefaultRenewInterval is the sidecar's renewal period when its pod does not set one; timing on
// the operator's side that waits for a renewal allows for it. The pods the operator builds pass
// their own interval and a Lease duration of several intervals (internal/operator/resources).
package memberlease
