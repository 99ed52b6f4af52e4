// Package backupgate is the one definition of "voluntary disruptions wait for the backup": DEP-01
// ("BackupReady") postpones potentially disruptive maintenance (rolling updates, vertical
// scaling, evictions for node roll-outs) while the Etcd's BackupReady condition is False, so a
// cascade of failures on top of a failing backup loses no more data than the backup schedule
// says. Every planner that starts a voluntary disruption (internal/decide/rollout, internal/decide/defrag,
// internal/decide/membership's scale-in) and the PodDisruptionBudget (internal/operator/resources) read the same
// Gate and name the same rule. Recovery, the replacement of lost members and scale-out never
// wait on it: they restore safety. Pure: no I/O, no clock.
package backupgate
