// Package backupgate is the one definition of "voluntary disruptions wait for the backup": DEP-01
// ("BackupReady") postpones potentially disruptive maintenance (rolling updates, vertical scaling,
// evictions for node roll-outs) while the Etcd's BackupReady condition is False, so a cascade of
// failures on top of a failing backup loses no more data than the backup schedule says.
//
// Of(etcd, waitForBackupReady) is the Gate: it holds when the operator's switch
// controllers.etcd.waitForBackupReady is on, the Etcd has a backup store and its BackupReady
// condition is False. Unknown (no snapshot reported yet) does not hold: DEP-01 postpones on False
// only. Rule (wait/backup-not-ready) is the id the rollout and membership planners wait under, and
// DefragRule the same wait in the defragmentation planner.
//
// Every planner that starts a voluntary disruption (internal/decide/rollout,
// internal/decide/defrag, internal/decide/membership's scale-in) and the PodDisruptionBudget's
// minAvailable (internal/operator/resources) read the same Gate and name the same rule. Recovery,
// the replacement of lost members and scale-out never wait on it: they restore safety. See
// docs/architecture.md, "Voluntary disruptions and the backup".
//
// Pure: no I/O, no clock.
package backupgate
