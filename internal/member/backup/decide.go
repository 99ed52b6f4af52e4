package backup

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Action is what the loop does next.
type Action string

const (
	ActionNone  Action = "none"
	ActionFull  Action = "full"
	ActionDelta Action = "delta"
	ActionGC    Action = "gc"
)

// Rule ids: every decision names the one that made it.
const (
	RuleNotLeader     = "backup/wait/not-leader"
	RuleFullNone      = "backup/full/none-yet"
	RuleFullOnDemand  = "backup/full/on-demand"
	RuleFullScheduled = "backup/full/scheduled"
	RuleFullNoHistory = "backup/full/delta-history-compacted"
	RuleDeltaOnDemand = "backup/delta/on-demand"
	RuleDeltaPeriod   = "backup/delta/period"
	RuleGCPeriod      = "backup/gc/period"
	RuleRetryBackoff  = "backup/wait/retry-backoff"
	RuleNothingDue    = "backup/wait/nothing-due"
)

// State is what the loop knows when it decides.
type State struct {
	Leader bool
	// HaveFull is false until a full snapshot exists in the store.
	HaveFull bool
	// LastFull is when the newest full snapshot was taken.
	LastFull time.Time
	// LastDelta is when the last delta attempt ended (or the last full snapshot, whichever is
	// later): the period counts from there.
	LastDelta time.Time
	LastGC    time.Time
	// OnDemand is the pending on-demand full snapshot request ("" none).
	OnDemand string
	// OnDemandDelta is the pending on-demand delta snapshot request ("" none).
	OnDemandDelta string
	// NeedFull is set when a delta could not be built (history compacted).
	NeedFull bool
	// RetryAt holds back any attempt after a failure.
	RetryAt time.Time
}

// Settings are the Etcd's spec.backup, parsed.
type Settings struct {
	FullSchedule cron.Schedule
	DeltaPeriod  time.Duration
	GCPeriod     time.Duration
}

// Decision is the next action and why.
type Decision struct {
	Action Action
	Rule   string
	Reason string
}

// Decide picks the next action, full snapshots first (a delta needs one to follow), then deltas,
// then garbage collection. A delta on demand goes ahead of a scheduled full snapshot: it is asked
// for now, and takes seconds. It is pure.
func Decide(s State, cfg Settings, now time.Time) Decision {
	switch {
	case !s.Leader:
		return Decision{ActionNone, RuleNotLeader, "this member does not lead the cluster; the leader's agent takes the snapshots"}
	case now.Before(s.RetryAt):
		return Decision{ActionNone, RuleRetryBackoff, fmt.Sprintf("the last attempt failed; next attempt in %s", s.RetryAt.Sub(now).Round(time.Second))}
	case !s.HaveFull:
		return Decision{ActionFull, RuleFullNone, "the store holds no full snapshot yet"}
	case s.OnDemand != "":
		return Decision{ActionFull, RuleFullOnDemand, fmt.Sprintf("full snapshot requested (%s)", s.OnDemand)}
	case s.NeedFull:
		return Decision{ActionFull, RuleFullNoHistory, "the events since the last snapshot are compacted away; a delta cannot be built"}
	case s.OnDemandDelta != "":
		return Decision{ActionDelta, RuleDeltaOnDemand, fmt.Sprintf("delta snapshot requested (%s)", s.OnDemandDelta)}
	}
	if next := cfg.FullSchedule.Next(s.LastFull); !now.Before(next) {
		return Decision{ActionFull, RuleFullScheduled, fmt.Sprintf("scheduled at %s; the last full snapshot was taken %s ago", next.UTC().Format(time.RFC3339), now.Sub(s.LastFull).Round(time.Second))}
	}
	if cfg.DeltaPeriod > 0 && now.Sub(s.LastDelta) >= cfg.DeltaPeriod {
		return Decision{ActionDelta, RuleDeltaPeriod, fmt.Sprintf("%s since the last delta, period %s", now.Sub(s.LastDelta).Round(time.Second), cfg.DeltaPeriod)}
	}
	if cfg.GCPeriod > 0 && now.Sub(s.LastGC) >= cfg.GCPeriod {
		return Decision{ActionGC, RuleGCPeriod, fmt.Sprintf("%s since the last garbage collection, period %s", now.Sub(s.LastGC).Round(time.Second), cfg.GCPeriod)}
	}
	return Decision{ActionNone, RuleNothingDue, "nothing due"}
}
