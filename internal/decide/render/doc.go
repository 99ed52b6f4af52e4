// Package render is the Etcd reconciler's one decision per pass: what it renders into the objects
// an Etcd owns and which orders it gives the members, over everything that starts from what runs.
// Each part is its own planner's (the TLS transport stage, internal/decide/transport; the
// StatefulSet's update strategy, internal/decide/updatestrategy; the etcd version and downgrade,
// internal/decide/versionchange; the data volumes, internal/decide/volumechange; the members' TLS
// material, internal/decide/trustchange); Plan runs them on one observation and merges what they
// say into what the reconciler does with it: the refusals that stop the pass (Refusal), the
// conditions that record a change in view (Change), and how soon to look again (Recheck, the
// soonest of those asked, whatever the order). `plan` prints the same decision.
//
// Pure: Plan is a function of what it is given (the reconciler observes once, then decides, then
// records, then acts); the tests check that every part is its planner's answer, that a refusal is
// reported exactly when a planner refuses, and that the soonest recheck wins.
package render
