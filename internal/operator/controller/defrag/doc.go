// Package defrag holds the defragmentation controller: it runs spec.etcd.defragmentationSchedule.
// At each scheduled time it starts a run and, step by step, asks the pure planner
// (internal/decide/defrag) which member to defragment next, defragments that one member over mTLS
// (Maintenance.Defragment, bounded by spec.etcd.etcdDefragTimeout) and looks again, so every step
// is decided on fresh health. It reports each member's database size before and after, and the
// duration, as an Event and metrics (metrics.go).
//
// Before each member's call it holds DefragmentationInProgress on the Etcd read afresh, and only if
// that shows no other operation in flight and no wait for the backup (hold); it clears the
// condition when the call returns (release), and clears one left over by a failed release or a
// stopped operator once the Etcd's defragmentation timeout and a margin have passed
// (releaseLeftOver). Observe and StatusByMember turn the objects and the members' answers into the
// planner's input; the plan command calls them too.
//
// The schedule lives in memory: after an operator restart the next run is the schedule's next time
// from then. A schedule that does not parse keeps the previous one (the Etcd reconciler reports the
// error).
package defrag
