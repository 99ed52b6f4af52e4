// Package membership holds the membership controller (DEP-01): it moves an etcd cluster's members
// towards the Etcd's spec.replicas through learners, replaces members whose data is gone and
// removes members no pod stands for, one step per reconcile, as internal/decide/membership decides.
// It keeps no state of its own: every reconcile starts from what the members and the pods say, so
// an operator restart mid-operation resumes where the cluster is.
//
// Each reconcile carries out at most one action: add a learner, promote it, remove a member, move a
// recorded peer URL to follow its pod, move leadership, or set the StatefulSet's replicas; it sets
// ScaleOperationInProgress and an Event per action or refusal. Observe, WithHeard and Hear (the
// leader's view, asked live) turn the objects and the members' answers into the planner's input;
// the plan command calls them too. A seeded learner's keyspace is compared with the leader's before
// it is promoted (seedcheck.go). Once its own plan is settled it asks internal/decide/memberhealth
// and deletes the one pod that names (memberhealth.go: UID and resourceVersion preconditions, an
// Event, the MemberRestart condition).
//
// It also records what recovery later decides on: status.clusterID, from a member that answers or
// else from a majority of fresh member Leases (leaseclusterid.go), and status.voters, from the
// recorded cluster's leader only (voters.go).
package membership
