package workload

import (
	"context"
	"fmt"
	"time"
)

// LeaderStepWindow is how far around a new leader's first sighting a write gap counts as the
// leader step's: the election (or handover) happens before the monitor, polling every 100 ms,
// sees the new term.
const (
	leaderStepBefore = time.Second
	leaderStepAfter  = 500 * time.Millisecond
)

// WaitWarm waits until the quorum monitor saw a quorum and the writer got a write acknowledged,
// and returns when: figures count from then, since the instruments' first connections on a busy
// machine are not the cluster's doing.
func (r *Recorder) WaitWarm(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		q, w := r.quorum.Snapshot(), r.writer.Snapshot()
		if q.Rounds > 0 && !q.InLoss && !q.InUnconfirmed && w.AckedWrites > 0 {
			return time.Now(), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("instruments not working %s after start: %d quorum rounds (in loss: %v, unconfirmed: %v), %d writes acknowledged",
				timeout, q.Rounds, q.InLoss, q.InUnconfirmed, w.AckedWrites)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Since recounts the figures the instruments' own start-up could have touched (quorum loss and
// unconfirmed time, failed writes by kind, the longest write gap, leader changes) from warm on.
// From the bump on, it gives the rollout's figures alone.
func (r Report) Since(warm time.Time) Report {
	end := r.Stopped
	r.QuorumLossMs, r.LongestQuorumLossMs = clip(r.QuorumLosses, warm, end)
	r.QuorumUnconfirmedMs, r.LongestQuorumUnconfirmedMs = clip(r.QuorumUnconfirmed, warm, end)
	r.FailedWrites, r.WriteTimeouts, r.WriteRefusals = 0, 0, 0
	for _, f := range r.WriteFailures {
		if f.At.Before(warm) {
			continue
		}
		r.FailedWrites++
		switch f.Class {
		case ClassDeadline:
			r.WriteTimeouts++
		case ClassCanceled:
		default:
			r.WriteRefusals++
		}
	}
	if !r.LongestWriteGapStart.IsZero() && r.LongestWriteGapStart.Before(warm) {
		r.LongestWriteGapMs = r.LongestWriteGapWithin(warm, end)
	}
	r.LeaderChanges = 0
	for i := 1; i < len(r.LeaderEpochs); i++ {
		if !r.LeaderEpochs[i].At.Before(warm) && r.LeaderEpochs[i].LeaderID != r.LeaderEpochs[i-1].LeaderID {
			r.LeaderChanges++
		}
	}
	return r
}

// clip sums the parts of spans after from (an open span ends at end) and returns the total and
// the longest.
func clip(spans []Interval, from, end time.Time) (total, longest int64) {
	for _, l := range spans {
		s, e := l.Start, l.End
		if e.IsZero() {
			e = end
		}
		if s.Before(from) {
			s = from
		}
		if ms := e.Sub(s).Milliseconds(); ms > 0 {
			total += ms
			longest = max(longest, ms)
		}
	}
	return total, longest
}

// LongestWriteGapWithin is the longest time without an acknowledgement inside [from, to]: from
// from to the first acknowledgement, between acknowledgements, and from the last one to to.
// Over a window with no rollout it is the idle baseline jitter of this machine and cluster.
func (r Report) LongestWriteGapWithin(from, to time.Time) int64 {
	var longest time.Duration
	prev := from
	for _, l := range r.WriteLatencies {
		if l.At.Before(from) {
			continue
		}
		if l.At.After(to) {
			break
		}
		longest = max(longest, l.At.Sub(prev))
		prev = l.At
	}
	longest = max(longest, to.Sub(prev))
	return longest.Milliseconds()
}

// LeaderStepGapMs is the longest write gap around a leader change: between acknowledgements
// (or from the window's start) overlapping the window from leaderStepBefore before to
// leaderStepAfter after the first sighting of every term after the first. Zero without a change.
func (r Report) LeaderStepGapMs() int64 {
	var longest int64
	for i := 1; i < len(r.LeaderEpochs); i++ {
		at := r.LeaderEpochs[i].At
		from, to := at.Add(-leaderStepBefore), at.Add(leaderStepAfter)
		// Gaps straddling either edge count whole: from the last acknowledgement before the
		// window to the first one after it.
		start, end := from, to
		for _, l := range r.WriteLatencies {
			if l.At.Before(from) {
				start = l.At
			}
			if !l.At.Before(to) {
				end = l.At
				break
			}
		}
		longest = max(longest, r.LongestWriteGapWithin(start, end))
	}
	return longest
}
