// Package updatestrategy decides the member StatefulSet's spec.updateStrategy.type from the
// QuorumAwareUpdatesWithOnDelete gate and the rollout in flight. Turning the gate off hands the
// rollout to the Kubernetes StatefulSet controller, which deletes the next outdated pod at once,
// whatever the member the OnDelete controller replaced is doing; so OnDelete is kept until that
// step has finished: no member pod terminating, none missing, every updated pod ready again (or no
// rollout in flight: every pod at the update revision).
// Decide is pure: no I/O, no clock.
package updatestrategy
