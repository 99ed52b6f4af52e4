// Package updatestrategy decides the member StatefulSet's spec.updateStrategy.type from the
// QuorumAwareUpdatesWithOnDelete gate and the rollout in flight. The gate on means OnDelete, which
// is always safe to switch to: it deletes nothing. Turning the gate off hands the rollout to the
// Kubernetes StatefulSet controller, which deletes the next outdated pod at once, whatever the
// member the OnDelete controller replaced is doing; so OnDelete is kept, and the hold announced on
// the StatefulSet, until that step has finished: no member pod terminating, none missing, every
// updated pod ready again (or no rollout in flight: every pod at the update revision). The Etcd
// reconciler applies the answer and holds the UpdateStrategyHeld condition meanwhile (package
// operation).
//
// Decide is pure: no I/O, no clock, one named rule per answer.
package updatestrategy
