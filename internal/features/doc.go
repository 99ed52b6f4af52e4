// Package features holds the operator's feature gates as an immutable value: today one,
// QuorumAwareUpdatesWithOnDelete (off by default, alpha), which puts member StatefulSets on the
// OnDelete update strategy and the OnDelete controller in charge of rollouts. Gates are parsed once
// from the OperatorConfiguration (New, which refuses an unknown name) and passed to whoever needs
// them, so tests can run side by side with different gates and no code reads a global.
package features
