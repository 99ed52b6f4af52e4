// Package recovery decides the operator's part of recovering an etcd cluster that lost quorum
// together with the data of a majority of its voters (DEP-01 operator scenario 10, "Quorum lost
// with a majority of members NotReady", and "Recovering an etcd cluster from failure of majority of
// members"): one member is restored from the backup as a new single-member cluster, the pods of the
// old cluster are replaced, and the membership controller grows the new cluster back to
// spec.replicas through learners.
//
// Plan is pure: the controller (internal/operator/controller/recovery) observes, asks Plan, and
// carries out at most one action. Every rule has a stable id and every reason carries its numbers.
//
// The first duty is never to roll a cluster back while its data exists. Plan therefore reasons only
// about the recorded voters (the voting membership the operator last saw while the cluster was
// quorate, status.voters), never about pods: a pod that never joined, or a member that is down,
// unreachable, crash-looping or partitioned, may still hold data or is no voter at all. A voter
// counts as without data only when its current pod incarnation has proven it: its init step, still
// running in that very pod, reported an empty data dir and no leader, and that report is
// authenticated: admission lets only the pod's own identity and the operator write it
// (Observed.ProofUnauthenticated; a namespace user or a sibling pod could otherwise forge "data
// lost" for voters that are only down, and roll the cluster back). A restore is ordered only when
// such proofs cover a majority of the recorded voters (so the voters that may hold data can never
// form a quorum again), quorum has been lost for the grace period and a backup store is configured;
// it is called off as soon as that stops being true before the restored member leads.
//
// After a restore is ordered, Plan names each next step: wait for the restore, record the new
// cluster ID, replace the pods still running the old cluster, finish once the restored member
// leads. A new Etcd that never formed a cluster and whose store holds a backup starts from it, as
// etcd-druid's does (bootstrap.go, rule recovery/bootstrap-from-backup): only once every member of
// spec.replicas has proven an empty data dir in its current pod and waits for it. The rules are
// property-tested (plan_test.go); docs/recovery.md is the operator's guide.
package recovery
