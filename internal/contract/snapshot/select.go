package snapshot

import (
	"fmt"
	"sort"
)

// Chain is what a restore applies: a full snapshot, then deltas in order. Consecutive deltas
// may overlap when two agents briefly both believed they led (each delta is a faithful record
// of etcd's history, so an overlap repeats identical events); a restore skips the events at or
// below the revision it has reached.
type Chain struct {
	Full   Snapshot
	Deltas []Snapshot
	// Gap is set when a delta newer than the chain's end exists but none continues it: those
	// newer deltas cannot be applied and the chain ends early.
	Gap string
}

// EndRevision is the revision a restore of the chain reaches.
func (c Chain) EndRevision() int64 {
	if n := len(c.Deltas); n > 0 {
		return c.Deltas[n-1].EndRevision
	}
	return c.Full.EndRevision
}

// Latest picks the full snapshot with the highest revision (the newest on a tie) and the deltas
// that continue it without a gap. ok is false when there is no full snapshot.
func Latest(snaps []Snapshot) (c Chain, ok bool) {
	var deltas []Snapshot
	for _, s := range snaps {
		switch s.Kind {
		case KindFull:
			if !ok || s.EndRevision > c.Full.EndRevision ||
				(s.EndRevision == c.Full.EndRevision && s.CreatedOn.After(c.Full.CreatedOn)) {
				c.Full, ok = s, true
			}
		case KindDelta:
			deltas = append(deltas, s)
		}
	}
	if !ok {
		return Chain{}, false
	}
	c.Deltas, c.Gap = continuing(c.Full.EndRevision, deltas)
	return c, true
}

// continuing walks from revision end, each step taking the delta that starts at or before the
// next revision and reaches furthest (greedy: it covers the most with the fewest objects).
func continuing(end int64, deltas []Snapshot) ([]Snapshot, string) {
	sort.Slice(deltas, func(i, j int) bool {
		if deltas[i].StartRevision != deltas[j].StartRevision {
			return deltas[i].StartRevision < deltas[j].StartRevision
		}
		return deltas[i].EndRevision > deltas[j].EndRevision
	})
	var out []Snapshot
	for {
		best, found := Snapshot{}, false
		for _, d := range deltas {
			if d.StartRevision > end+1 {
				break
			}
			if d.EndRevision > end && (!found || d.EndRevision > best.EndRevision) {
				best, found = d, true
			}
		}
		if !found {
			break
		}
		out = append(out, best)
		end = best.EndRevision
	}
	for _, d := range deltas {
		if d.StartRevision > end+1 {
			return out, fmt.Sprintf("no delta holds revision %d; %s and later cannot be applied", end+1, d.Name())
		}
	}
	return out, ""
}

// LatestOfKind is the snapshot of kind k with the highest end revision, for the status Leases.
func LatestOfKind(snaps []Snapshot, k Kind) (Snapshot, bool) {
	var best Snapshot
	found := false
	for _, s := range snaps {
		if s.Kind == k && (!found || s.EndRevision > best.EndRevision ||
			(s.EndRevision == best.EndRevision && s.CreatedOn.After(best.CreatedOn))) {
			best, found = s, true
		}
	}
	return best, found
}
