package workload

import (
	"context"
	"fmt"
	"time"
)

// leaderPollSlack is how late the leader monitor, polling every DefaultLeaderPollInterval, may see
// what changed: a leader step starts up to one poll before its first sign.
const leaderPollSlack = DefaultLeaderPollInterval

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

// LeaderStepGapMs is the longest write gap at a leader step. A step runs from the first sign
// that the old leader is going, less one poll (the sign is seen up to a poll late), to the new
// term's first sighting. A sign is the old leader no longer answering, or a member that had been
// following it reporting another leader, none, or a later term; a member that was not following
// it (one just restarted) gives none. Without a sign (a handover the poll did not catch in
// between) the step is the poll before the new term's sighting. The longest gap between
// acknowledgements that overlaps a step counts, whole where it straddles an edge: an outage at
// the step, not a slow write of something else nearby. Zero without a leader change.
func (r Report) LeaderStepGapMs() int64 {
	var longest int64
	for _, step := range r.leaderSteps() {
		longest = max(longest, r.gapOverlapping(step))
	}
	return longest
}

// gapOverlapping is the longest gap between acknowledgements that overlaps span, counted whole.
func (r Report) gapOverlapping(span Interval) int64 {
	start, end := span.Start, span.End
	for _, l := range r.WriteLatencies {
		if l.At.Before(span.Start) {
			start = l.At
		}
		if !l.At.Before(span.End) {
			end = l.At
			break
		}
	}
	return r.LongestWriteGapWithin(start, end)
}

// leaderSteps are the spans of the leader changes, from the first sign the old leader was going
// (less leaderPollSlack) to the new term's first sighting.
func (r Report) leaderSteps() []Interval {
	var steps []Interval
	last := map[string]LeaderObservation{} // each member's observation in force
	obs := r.LeaderTimeline
	next := 0
	for i := 1; i < len(r.LeaderEpochs); i++ {
		prev, cur := r.LeaderEpochs[i-1], r.LeaderEpochs[i]
		changed := prev.LeaderID != cur.LeaderID
		sign := cur.At
		for ; next < len(obs) && !obs[next].At.After(cur.At); next++ {
			o := obs[next]
			if changed && sign.Equal(cur.At) && o.At.After(prev.At) {
				was, seen := last[o.Member]
				oldGone := prev.Leader != "" && o.Member == prev.Leader && !o.Reachable
				moved := seen && was.Reachable && was.LeaderID == prev.LeaderID && o.Reachable && o.LeaderID != prev.LeaderID
				if oldGone || moved {
					sign = o.At
				}
			}
			last[o.Member] = o
		}
		if changed {
			steps = append(steps, Interval{Start: sign.Add(-leaderPollSlack), End: cur.At})
		}
	}
	return steps
}
