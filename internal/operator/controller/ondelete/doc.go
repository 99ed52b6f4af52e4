// Package ondelete holds the OnDelete controller (DEP-07): for StatefulSets owned by an Etcd and
// running with the OnDelete update strategy it deletes outdated pods in the order
// internal/decide/rollout decides (one per reconcile, or a batch of followers within the quorum's
// headroom when configured), moving leadership off the leader before its pod goes, and learning
// member roles and applied indexes from the members themselves.
//
// Each reconcile runs internal/operator/decision's Decide, asks the Etcd read afresh whether
// another operation now holds the rollout (rollout.HeldByOperation), and carries the decision out:
// the pods are deleted with UID and resourceVersion preconditions, or leadership is moved first
// (handover.go: MoveLeader to the leader, the target confirmed from the members' Status, a failure
// counted on the pod so the planner tries another transferee next). It records the decision in
// status.lastOperation, an Event named after the rule and metrics (metrics.go). While the rollout
// waits on a replaced member, the rejoin watch (rejoin.go) asks that member for a linearizable read
// and wakes the controller once it serves: no Kubernetes event says so. The whole path of one
// decision is told in docs/architecture.md, "One rollout decision, from the Etcd to a pod delete".
package ondelete
