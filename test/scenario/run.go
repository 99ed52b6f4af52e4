// Package scenario runs one rollout scenario the way the e2e tests, the benchmark and the helm
// e2e (with the demo) all do: on a cluster created and put under its fault by the caller, it
// starts the instruments once the fault has settled, keeps an idle baseline, bumps the image,
// waits for the rollout, stops the instruments once the cluster serves again and returns one
// Result. A scenario states what the design promises for it (Promise), which the e2e tests assert.
package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

const (
	// DefaultStopBudget bounds stopping the instruments: the audit of the acknowledged writes
	// waits for a linearizable read.
	DefaultStopBudget = 90 * time.Second
	// canceledStopBudget is the stop's bound when the caller gave up: a few seconds only.
	canceledStopBudget = 5 * time.Second
	// servingWithin bounds the wait, after the rollout, for a write acknowledged: the figures end
	// once the cluster serves again, and a cluster that does not is the rollout's failure.
	servingWithin = 30 * time.Second
	defaultTick   = 200 * time.Millisecond
)

// Hook acts on the cluster while the instruments run.
type Hook func(ctx context.Context, in *Instruments) error

// Spec is one rollout of a cluster already created, converged and put under its fault.
type Spec struct {
	Cluster *stack.EtcdCluster
	// Image is what the rollout bumps to; FinalImage what it ends on when AfterBump changes the
	// image again (default Image).
	Image, FinalImage string
	Writer            workload.WriterOptions
	// QuorumLost: the fault took the quorum away; the instruments start without waiting for a
	// leader to settle on.
	QuorumLost bool
	// Concurrency is the OnDelete controller's maxConcurrentMemberUpdates, for the deletion
	// auditor.
	Concurrency int
	// Idle is the baseline before the bump with the instruments running and no rollout: its
	// longest write gap is the run's idle jitter.
	Idle time.Duration
	// AtBump acts right before the image changes (its time is no part of the idle baseline);
	// AfterBump during the rollout (kill a member, restart the operator, ...).
	AtBump, AfterBump Hook
	// Stall gives up on a rollout with no progress (pods updated or ready, none terminating)
	// for this long, Timeout on any rollout after this long; zero: only ctx bounds it. A
	// rollout given up on is a Result with Completed false, not an error.
	Stall, Timeout time.Duration
	// Tick is the poll of the rollout's progress (200 ms); OnTick, when set, is called at every
	// poll, done at the last one of a completed rollout.
	Tick   time.Duration
	OnTick func(ctx context.Context, in *Instruments, done bool)
	// WantEvents are Event reasons (prefixes) the scenario asserts; the runner waits for each
	// up to EventDelivery and returns what came in Result.Events.
	WantEvents []string
	// StopBudget bounds stopping the instruments (DefaultStopBudget).
	StopBudget time.Duration
}

// Run runs the rollout. The Result holds whatever was measured, also when err says the run could
// not go on (the instruments did not start, the bump or a hook failed, ctx ended).
func Run(ctx context.Context, s Spec) (Result, error) {
	if s.FinalImage == "" {
		s.FinalImage = s.Image
	}
	if s.Tick <= 0 {
		s.Tick = defaultTick
	}
	if s.StopBudget <= 0 {
		s.StopBudget = DefaultStopBudget
	}
	in, err := StartInstruments(ctx, s.Cluster, InstrumentOptions{Writer: s.Writer, QuorumLost: s.QuorumLost, Concurrency: s.Concurrency})
	if err != nil {
		return Result{}, err
	}
	// A hook that ends the goroutine (t.Fatal) leaves nothing running; after the stop below
	// this does nothing.
	defer in.Stop(canceledStopBudget)

	completed, note, took, err := drive(ctx, s, in)
	budget := s.StopBudget
	if ctx.Err() != nil {
		budget = canceledStopBudget
	}
	res := in.Stop(budget)
	res.Completed, res.Note = completed, note
	res.setDuration(took)
	if err != nil {
		return res, err
	}
	res.Events = map[string][]string{}
	for _, reason := range s.WantEvents {
		res.Events[reason] = EventsWithin(ctx, s.Cluster, reason, EventDelivery)
	}
	return res, nil
}

// drive runs the idle baseline, the bump and the rollout, and waits until the cluster serves
// again; it returns whether the rollout completed (or why not) and how long it took.
func drive(ctx context.Context, s Spec, in *Instruments) (completed bool, note string, took time.Duration, err error) {
	if err := sleep(ctx, s.Idle); err != nil {
		return false, "", 0, fmt.Errorf("idle baseline: %w", err)
	}
	in.IdleEnd(time.Now())
	if s.AtBump != nil {
		if err := s.AtBump(ctx, in); err != nil {
			return false, "", 0, fmt.Errorf("preparing the bump: %w", err)
		}
	}
	bumped := time.Now()
	in.Bumped(bumped)
	if err := s.Cluster.SetImage(ctx, s.Image); err != nil {
		return false, "", 0, fmt.Errorf("bumping the image to %s: %w", s.Image, err)
	}
	if s.AfterBump != nil {
		if err := s.AfterBump(ctx, in); err != nil {
			return false, "", time.Since(bumped), fmt.Errorf("during the rollout: %w", err)
		}
	}
	completed, note, err = waitRollout(ctx, s, in)
	took = time.Since(bumped)
	if err != nil || !completed {
		return completed, note, took, err
	}
	if err := waitServing(ctx, in.Recorder, time.Now()); err != nil {
		return completed, note, took, err
	}
	return completed, note, took, nil
}

// waitRollout waits until every member runs the final image's revision and is ready. It gives up
// (completed false, note why) when nothing moved for s.Stall or after s.Timeout; ctx ending is an
// error.
func waitRollout(ctx context.Context, s Spec, in *Instruments) (completed bool, note string, err error) {
	c := s.Cluster
	start := time.Now()
	lastChange := start
	var last stack.RolloutState
	seen := false
	for {
		st, stErr := c.State(ctx)
		if stErr == nil {
			// A terminating pod is progress under way (a hung member sits out its grace period).
			if !seen || st.Terminating > 0 || st.Updated != last.Updated || st.Ready != last.Ready || st.UpdateRevision != last.UpdateRevision {
				lastChange = time.Now()
			}
			last, seen = st, true
			done := st.Image == s.FinalImage && st.UpdateRevision != "" && st.Updated == c.Replicas && st.Ready == c.Replicas && st.Terminating == 0
			if s.OnTick != nil {
				s.OnTick(ctx, in, done)
			}
			if done {
				return true, "", nil
			}
		}
		now := time.Now()
		switch {
		case s.Stall > 0 && now.Sub(lastChange) > s.Stall:
			return false, fmt.Sprintf("no progress for %s (%s)", s.Stall, last), nil
		case s.Timeout > 0 && now.Sub(start) > s.Timeout:
			return false, fmt.Sprintf("not done after %s (%s)", s.Timeout, last), nil
		}
		if err := sleep(ctx, s.Tick); err != nil {
			return false, fmt.Sprintf("interrupted (%s)", last), fmt.Errorf("waiting for the rollout to %s (%s, last error %v): %w", s.FinalImage, last, stErr, err)
		}
	}
}

// waitServing waits, up to servingWithin, until the writer has a write acknowledged after since:
// the cluster serves again after the rollout.
func waitServing(ctx context.Context, rec *workload.Recorder, since time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, servingWithin)
	defer cancel()
	for {
		w := rec.Writer().Snapshot()
		if n := len(w.Acked); n > 0 && w.Acked[n-1].At.After(since) {
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("no write acknowledged within %s after the rollout (%d acknowledged, %d failed): %w",
				servingWithin, w.AckedWrites, w.FailedWrites, err)
		}
	}
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
