package ruleid

import (
	"strings"
	"unicode"
)

// ID names a rule. Ids are lower case words joined by '/' and '-'; they are stable, since users
// see them in plan output, metric labels, condition and Event reasons.
type ID string

// CamelCase turns the rule id into a CamelCase word usable as a Kubernetes condition or
// event reason ("rollout/non-participating/dead" → "RolloutNonParticipatingDead"). It is the only place the
// conversion happens, so metric labels, plan output and conditions stay in step.
func (r ID) CamelCase() string {
	var b strings.Builder
	upper := true
	for _, c := range string(r) {
		if !isASCIIAlnum(c) {
			upper = true
			continue
		}
		if b.Len() == 0 && !unicode.IsLetter(c) {
			// A reason has to start with a letter.
			b.WriteString("Rule")
		}
		if upper {
			c = unicode.ToUpper(c)
			upper = false
		}
		b.WriteRune(c)
	}
	if b.Len() == 0 {
		return "Unknown"
	}
	return b.String()
}

func isASCIIAlnum(c rune) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}
