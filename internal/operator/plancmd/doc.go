// Package plancmd backs the `etcd-conductor plan` command: it reads a cluster state, saved or
// live, runs the OnDelete controller's own decision pipeline (internal/operator/decision) on it and
// reports the decision together with the role resolution behind it, then the next step of the
// membership, recovery and defragmentation controllers through their own observation functions
// (controllers.go). Decoding is pure; ReadLive and the member questions do I/O only through the
// clients the caller passes in.
package plancmd
