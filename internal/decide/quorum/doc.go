// Package quorum is raft's majority arithmetic, in one place: how many voters a cluster needs to
// commit (Of: voters/2+1), and how many it can lose (Headroom). The planners that count a quorum,
// the Ready condition, the PodDisruptionBudget, the cluster-ID majority of member Leases and the
// test instruments all count it through this package, so no two places can disagree on it. It
// imports nothing of the project.
package quorum
