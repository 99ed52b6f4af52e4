package snapshot

import (
	"fmt"
	"sort"
	"time"
)

// Policy is spec.backup.garbageCollectionPolicy with its count.
type Policy struct {
	// Exponential thins old full snapshots out; otherwise LimitBased keeps the newest MaxFull.
	Exponential bool
	// MaxFull is how many full snapshots LimitBased keeps (at least 1).
	MaxFull int
}

// GC rule ids: every deletion carries the one that chose it.
const (
	RuleBeyondLimit = "gc/limit/beyond-limit"
	RuleThinned     = "gc/exponential/thinned"
	RuleSuperseded  = "gc/delta/superseded"
)

// Deletion is one snapshot garbage collection removes, and why.
type Deletion struct {
	Snapshot Snapshot
	Rule     string
	Reason   string
}

// GarbageCollect lists what policy p removes from snaps at now. It never removes the latest
// full snapshot or any delta that continues it (what a restore needs), so a store with one
// full snapshot is left as it is whatever the policy.
//
//   - LimitBased (etcd-druid's maxBackupsLimitBasedGC): the newest MaxFull full snapshots stay.
//   - Exponential: every full snapshot of the last hour stays, then the newest of each hour for
//     24 hours, of each day for 7 days and of each week for 4 weeks; older ones go.
//   - Deltas that end at or below the revision of the full snapshot before the latest (the one a
//     restore falls back to when the latest is corrupt) are superseded by it.
func GarbageCollect(snaps []Snapshot, p Policy, now time.Time) []Deletion {
	latest, ok := Latest(snaps)
	if !ok {
		return nil
	}
	var fulls []Snapshot
	for _, s := range snaps {
		if s.Kind == KindFull {
			fulls = append(fulls, s)
		}
	}
	// Newest first: by revision, then time.
	sort.Slice(fulls, func(i, j int) bool {
		if fulls[i].EndRevision != fulls[j].EndRevision {
			return fulls[i].EndRevision > fulls[j].EndRevision
		}
		return fulls[i].CreatedOn.After(fulls[j].CreatedOn)
	})
	var out []Deletion
	if p.Exponential {
		out = append(out, thin(fulls, latest.Full, now)...)
	} else {
		limit := max(p.MaxFull, 1)
		for i, s := range fulls {
			if i >= limit && s != latest.Full {
				out = append(out, Deletion{Snapshot: s, Rule: RuleBeyondLimit,
					Reason: fmt.Sprintf("%s is full snapshot %d by age; the limit keeps %d", s.Name(), i+1, limit)})
			}
		}
	}
	// Deltas are kept back to the newest full snapshot before the latest that stays: a restore
	// that finds the latest full snapshot corrupt falls back to that one and replays them.
	fallback := latest.Full
	deleted := map[Snapshot]bool{}
	for _, d := range out {
		deleted[d.Snapshot] = true
	}
	for _, f := range fulls {
		if f != latest.Full && !deleted[f] {
			fallback = f
			break
		}
	}
	for _, s := range snaps {
		if s.Kind == KindDelta && s.EndRevision <= fallback.EndRevision {
			out = append(out, Deletion{Snapshot: s, Rule: RuleSuperseded,
				Reason: fmt.Sprintf("%s ends at revision %d, at or below full snapshot %s (the one a restore falls back to)", s.Name(), s.EndRevision, fallback.Name())})
		}
	}
	return out
}

// thin keeps the newest full snapshot of each bucket; fulls come newest first.
func thin(fulls []Snapshot, latest Snapshot, now time.Time) []Deletion {
	type tier struct {
		within time.Duration
		bucket time.Duration
		name   string
	}
	tiers := []tier{
		{time.Hour, 0, ""},
		{24 * time.Hour, time.Hour, "hour"},
		{7 * 24 * time.Hour, 24 * time.Hour, "day"},
		{28 * 24 * time.Hour, 7 * 24 * time.Hour, "week"},
	}
	kept := map[string]bool{}
	var out []Deletion
	for _, s := range fulls {
		age := now.Sub(s.CreatedOn)
		if s == latest {
			continue
		}
		var t *tier
		for i := range tiers {
			if age < tiers[i].within {
				t = &tiers[i]
				break
			}
		}
		switch {
		case t == nil:
			out = append(out, Deletion{Snapshot: s, Rule: RuleThinned,
				Reason: fmt.Sprintf("%s is %s old, beyond the 4 weeks exponential retention keeps", s.Name(), age.Round(time.Minute))})
		case t.bucket == 0:
			// The last hour keeps everything.
		default:
			key := fmt.Sprintf("%s/%d", t.name, s.CreatedOn.Truncate(t.bucket).Unix())
			if kept[key] {
				out = append(out, Deletion{Snapshot: s, Rule: RuleThinned,
					Reason: fmt.Sprintf("%s: a newer full snapshot of the same %s is kept", s.Name(), t.name)})
				continue
			}
			kept[key] = true
		}
	}
	return out
}
