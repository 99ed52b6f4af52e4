package features

import (
	"fmt"
	"sort"
	"strings"
)

// Feature names a gate.
type Feature string

// Maturity is a gate's stage.
type Maturity string

const (
	Alpha Maturity = "Alpha"
	Beta  Maturity = "Beta"
	GA    Maturity = "GA"
)

const (
	// QuorumAwareUpdatesWithOnDelete runs member StatefulSets with the OnDelete update strategy and
	// lets the OnDelete controller replace pods in a quorum-safe order (DEP-07).
	QuorumAwareUpdatesWithOnDelete Feature = "QuorumAwareUpdatesWithOnDelete"
)

// Spec describes a known gate.
type Spec struct {
	Default  bool
	Maturity Maturity
}

// Known lists every gate this operator understands.
var known = map[Feature]Spec{
	QuorumAwareUpdatesWithOnDelete: {Default: false, Maturity: Alpha},
}

// Gates is the effective value of every known gate. The zero value has every gate at its default.
type Gates struct {
	overrides map[Feature]bool
}

// New returns the gates with the given overrides, rejecting any name that is not a known gate.
func New(overrides map[string]bool) (Gates, error) {
	var unknown []string
	g := Gates{overrides: make(map[Feature]bool, len(overrides))}
	for name, enabled := range overrides {
		if _, ok := known[Feature(name)]; !ok {
			unknown = append(unknown, name)
			continue
		}
		g.overrides[Feature(name)] = enabled
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return Gates{}, fmt.Errorf("unknown feature gate(s) %s; known gates: %s",
			strings.Join(unknown, ", "), strings.Join(KnownNames(), ", "))
	}
	return g, nil
}

// Enabled reports whether the gate is on: its override if set, else its default.
func (g Gates) Enabled(f Feature) bool {
	if v, ok := g.overrides[f]; ok {
		return v
	}
	return known[f].Default
}

// KnownNames lists the known gates, sorted.
func KnownNames() []string {
	names := make([]string, 0, len(known))
	for f := range known {
		names = append(names, string(f))
	}
	sort.Strings(names)
	return names
}

// String renders the effective gates as name=value pairs, sorted, for start-up logs.
func (g Gates) String() string {
	parts := make([]string, 0, len(known))
	for _, name := range KnownNames() {
		parts = append(parts, fmt.Sprintf("%s=%t", name, g.Enabled(Feature(name))))
	}
	return strings.Join(parts, ",")
}
