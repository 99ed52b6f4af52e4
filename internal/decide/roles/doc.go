// Package roles decides which member pod is the etcd leader, from two sources of different quality:
//
//   - member reports: what each etcd member says about itself when asked directly (its ID and the
//     leader ID it follows). This is current, but needs the members to be reachable.
//   - member Leases: the member-agent sidecar writes its member ID, cluster ID and role into the
//     holderIdentity of the Lease named like the pod (the format is
//     internal/contract/memberlease's). This is available without talking to etcd, but can lag a
//     leadership change (DEP-07 "Known limitation").
//
// Resolve prefers the members: the leader is the ID that a strict majority of the reachable members
// report. The Leases are then only a cross-check, and a disagreement is reported (Mismatch) but the
// members win. Without such a majority, or in LeaseOnly mode, the roles come from the Leases. A
// Lease counts only while it is fresh (renewTime + leaseDurationSeconds not before now): an agent
// that stopped renewing says nothing reliable about the present, so its pod's role is Unknown,
// which the planner ranks between followers and the leader. Resolve is pure; the caller passes the
// clock reading.
//
// The OnDelete controller and the plan command resolve roles through internal/operator/decision,
// which gathers the Leases and the members' answers; this package imports no package that does I/O.
package roles
