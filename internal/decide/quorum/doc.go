// Package quorum is raft's majority arithmetic, in one place: how many voters a cluster needs to
// commit, and how many it can lose. Every planner, controller, resource and test instrument that
// counts a quorum asks this package. It imports nothing of the project.
package quorum
