// Package plancmd backs the `etcd-conductor plan` command: it decodes a saved cluster state and
// saved member answers (DecodeState, DecodeMemberStatus) or reads one live (ReadLive), runs the
// OnDelete controller's own decision pipeline (internal/operator/decision) on it and reports the
// decision together with the role resolution behind it, then the next step of every other deciding
// controller through that controller's own observation functions (controllers.go): membership and
// its member restarts, recovery, defragmentation, and the Etcd reconciler's version decision
// (etcd.ObserveVersion). Output is what plan prints, as JSON or for a terminal (WriteText).
//
// Where a state lacks what a controller decides on, or a controller keeps something only in memory,
// the step says what it took instead or is not decided, with the reason; it never guesses. Decoding
// is pure; ReadLive and the member questions do I/O only through the clients the caller passes in.
package plancmd
