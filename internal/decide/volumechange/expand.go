package volumechange

import (
	"fmt"
	"slices"
)

// expand grows the claims in place: the capacity grows and the class allows it. Every claim of
// the running template is grown at once, not one member at a time: an expansion is online (the
// volume and then its filesystem grow under the running member, which neither restarts nor stops
// serving), so going one at a time would only make it slower without making it safer; a claim
// whose resize fails stays at its old size with its member running, and the wait that follows
// names it. The claims of ordinals above spec.replicas (left by a scale-in) grow too, so a member
// added on them later gets the new size.
//
// No readiness or member count is asked: nothing is taken from a member, so a single member grows
// as well as five.
func expand(o Observed, run Claims, change string) Decision {
	below := claimsBelow(o, run.Name, o.Desired.Capacity)
	return Decision{Name: run.Name, Recreate: true, Expand: below, ExpandTo: o.Desired.Capacity, MoveLeaderTo: -1,
		Waiting: true, Rule: RuleExpandClaims, Reason: fmt.Sprintf(
			"volume change %s: StorageClass %q allows volume expansion, so the claims grow in place (requests raised to %s: %s) and the StatefulSet is created again with claims %q of the new size, its pods kept; no member moves or restarts",
			change, o.Class.Name, o.Desired.Capacity, list(below), run.Name)}
}

// claimsBelow are the bound claims of template whose request is below size, by name. A claim not
// bound yet cannot grow (the apiserver refuses it): it is grown once bound, while the change is
// followed (settle), and a member's claim is waited for until then.
func claimsBelow(o Observed, template, size string) []string {
	var out []string
	for _, c := range o.Claims {
		if c.Template == template && c.Bound && less(c.Requested, size) {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}
