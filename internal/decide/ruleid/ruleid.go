// Package ruleid is the type of a planner's rule ids and the one place an id becomes a reason.
// Every planner (rollout, membership, memberhealth, recovery, defrag, updatestrategy) names the
// rule behind a decision with a stable id such as "rollout/non-participating/dead", qualified by
// the planner (its first element names one planner alone, test/structure checks it), so a reason
// says who wrote it: the plan command prints it, metrics are labelled with it and, through
// CamelCase, it becomes the condition and Event reason. The planners declare their ids as this type (their RuleID is an alias of ID), so
// none has to import another planner to spell a reason. It imports nothing of the project.
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
