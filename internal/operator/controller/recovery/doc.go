// Package recovery holds the recovery controller (DEP-01 operator scenario 10): when quorum has
// been lost beyond a grace period and a majority of the recorded voters proved in their current
// pods that their data is gone, it orders one of them to restore the backup as a new single-member
// cluster, records the new cluster ID, replaces the pods still running the old cluster, and leaves
// growing back to spec.replicas to the membership controller (learners). internal/decide/recovery
// decides; this package observes and acts, one step per reconcile.
//
// The order lives in the Etcd's status (status.recovery), which only the operator writes: a member
// pod or a namespace user who can write a Lease cannot order a restore. An order found the old way,
// as an annotation on a member Lease, is reported as a forgery and removed. Every step is an Event
// and the RecoveryInProgress condition.
//
// It writes the order (member, pod UID, fencing token), status.clusterID, status.voters after a
// restore and RecoveryInProgress through etcdstatus.Patch as WriterRecovery; a restore that stopped
// early on verified damage sets RestoreIncomplete until a person acknowledges it (incomplete.go). A
// report proves a voter's data gone only while internal/operator/reportauth says the member reports
// are authenticated. NothingToRecover (from the informer cache alone, so a healthy fleet costs no
// member query) and Observe turn the objects and the members' answers into the planner's input; the
// plan command calls them too.
package recovery
