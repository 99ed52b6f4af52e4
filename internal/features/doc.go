// Package features holds the operator's feature gates as an immutable value. Gates are parsed once
// from the OperatorConfiguration and passed to whoever needs them, so tests can run side by side
// with different gates and no code reads a global.
package features
