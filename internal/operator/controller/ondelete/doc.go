// Package ondelete holds the OnDelete controller (DEP-07): for StatefulSets owned by an Etcd and
// running with the OnDelete update strategy it deletes outdated pods in the order internal/decide/rollout
// decides (one per reconcile, or a batch of followers within the quorum's headroom when
// configured), moving leadership off the leader before its pod goes, and learning member roles
// and applied indexes from the members themselves.
package ondelete
