// Package membership decides how an etcd cluster's membership moves towards the Etcd's
// spec.replicas (DEP-01): scale out through learners, one at a time; scale in by removing the
// highest ordinals first, leadership moved off first; replace a member whose data is gone; clean up
// learners left behind and members no pod stands for. Plan is pure, no I/O and no clock: the
// controller (internal/operator/controller/membership) observes pods and members, asks Plan, and
// carries out at most one action.
//
// Every rule has a stable id, and every decision's reason carries the numbers it was made on.
// Quorums are counted on the voters the leader hears (Member.Heard: it leads, or it served a
// linearizable read, which needs the leader), never on the members that answered the operator: a
// member cut off from the leader on the peer network still answers. No rule removes a voter unless
// the voters that remain and that the leader hears are a quorum of the voters that remain, and none
// removes, promotes, adds or moves leadership before the controller has asked which voters the
// leader hears; no rule adds a learner while one exists; a learner is never a leadership target.
//
// A learner seeded from a full snapshot (Member.Seeded, internal/decide/seeding) is promoted only
// once its keyspace equals the leader's at one revision (Member.Keyspace, compared by the
// controller), and removed when it differs: the snapshot was not this cluster's data, and the
// learner joins again unseeded.
//
// The rule ids and Observed are in types.go, the ordered rule list and each rule in plan.go; table
// cases and the properties every plan keeps (TestPlanProperties) in plan_test.go.
package membership
