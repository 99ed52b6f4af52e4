// Package reportauth says whether the members' reports on their Leases can be told from forgeries:
// the init step's start report (a member found its data dir empty, the proof the recovery
// controller restores on), its start decision, the member ID whose data is lost and what is kept
// aside (internal/contract/memberlease). A Lease is writable by every member pod of its Etcd (one
// ServiceAccount) and, once etcd-druid's disable-etcd-component-protection is set on the Etcd, by
// any namespace user RBAC lets update Leases; only an admission policy can hold each report to the
// pod it is about. The chart's member report policy does (templates/member-report-policy.yaml: the
// operator, or the member pod the Lease belongs to, with its pod-bound token's pod name and UID);
// the operator cannot see admission happen, so it checks that policy and its binding are installed,
// in force and unnarrowed (Verify, pure: they exist, fail closed, deny, and are not narrowed), at
// start and then, when asked, at most once per CheckInterval (Checker, one minute by default, two
// GETs under the ClusterRole of its own report-auth rules). Without them a report proves nothing,
// unless the operator is configured to trust unauthenticated reports
// (memberReports.trustUnauthenticated).
//
// The recovery controller restores on a start report only while the Checker says reports are
// authenticated; its answer is the recovery planner's Observed.ProofUnauthenticated.
package reportauth
