package volumechange

import (
	"fmt"
	"slices"
)

// expanding tells whether the change recorded in flight is a growth in place.
func expanding(recorded string) bool {
	return recorded == RuleExpandClaims.CamelCase() || recorded == RuleWaitExpanded.CamelCase()
}

// settle follows a change made (the StatefulSet asks for what the spec does) to its end: for a
// move, every member on the new claims and ready; for a growth in place, every member's claim at
// the new size. Then the change is done, and the old claims kept are named: the claims of a
// template no member mounts any more, left with their data for the user to delete.
func settle(o Observed, run Claims) Decision {
	d := Decision{Name: run.Name, MoveLeaderTo: -1, InFlight: true, Waiting: true}
	members := map[string]bool{}
	for _, p := range o.Members {
		members[p] = true
	}
	if expanding(o.Recorded) {
		if expandable(o.Class) {
			// A claim that did not get its new request (its patch failed, or it was made from the
			// old template meanwhile) is grown now; the StatefulSet already asks for the size.
			if below := claimsBelow(o, run.Name, run.Capacity); len(below) > 0 {
				d.Rule, d.Expand, d.ExpandTo = RuleExpandClaims, below, run.Capacity
				d.Reason = fmt.Sprintf("claims of template %q ask less than its %s: requests raised (%s)", run.Name, run.Capacity, list(below))
				return d
			}
		}
		var lag []string
		grown := 0
		for _, c := range o.Claims {
			if c.Template != run.Name || !members[c.Pod] {
				continue
			}
			if c.Capacity == "" || less(c.Capacity, run.Capacity) {
				lag = append(lag, fmt.Sprintf("%s at %s%s", c.Name, orNone(c.Capacity), paren(c.Resizing)))
				continue
			}
			grown++
		}
		if len(lag) > 0 {
			slices.Sort(lag)
			d.Rule = RuleWaitExpanded
			d.Reason = fmt.Sprintf("claims %q growing to %s: %d/%d members' claims there; waiting for %s",
				run.Name, run.Capacity, grown, grown+len(lag), list(lag))
			return d
		}
	} else {
		on := 0
		for _, p := range o.Members {
			if o.Mounted[p] == run.Name {
				on++
			}
		}
		if on < len(o.Members) || !o.Ready {
			d.Rule = RuleWaitMoved
			d.Reason = fmt.Sprintf("volume change to claims %q (%s): %d/%d members on them, every member ready: %t",
				run.Name, describe(run), on, len(o.Members), o.Ready)
			return d
		}
	}
	mounted := map[string]bool{}
	for _, t := range o.Mounted {
		mounted[t] = true
	}
	var kept []string
	for _, c := range o.Claims {
		if c.Template != run.Name && !mounted[c.Template] {
			kept = append(kept, c.Name)
		}
	}
	slices.Sort(kept)
	d = Decision{Name: run.Name, MoveLeaderTo: -1, Done: true, Kept: kept, Rule: RuleDone}
	done := fmt.Sprintf("every member on claims %q (%s)", run.Name, describe(run))
	if expanding(o.Recorded) {
		d.Rule = RuleExpanded
		done = fmt.Sprintf("claims %q grown in place to %s, every member kept its volume", run.Name, run.Capacity)
	}
	d.Reason = fmt.Sprintf("volume change done: %s; old claims kept with their data (delete them once no longer needed): %s", done, list(kept))
	return d
}

func orNone(s string) string {
	if s == "" {
		return "no capacity yet"
	}
	return s
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
