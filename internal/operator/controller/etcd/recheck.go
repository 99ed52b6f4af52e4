package etcd

import "time"

// recheck is one reason the reconciler looks at an Etcd again without an event (pods, Secrets and
// members are not watched here): how soon, and why.
type recheck struct {
	after time.Duration
	why   string
}

// soonest merges the rechecks a pass asked for: the soonest wins, whatever order they were asked
// in, so a slow recheck (a broken backup Secret's 30 s) never delays a step in flight that asked for
// 3 s (a downgrade, a CA rotation). The zero recheck, when none was asked.
func soonest(rechecks []recheck) recheck {
	var first recheck
	for _, r := range rechecks {
		if r.after > 0 && (first.after == 0 || r.after < first.after) {
			first = r
		}
	}
	return first
}
