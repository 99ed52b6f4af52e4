package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// Instruments measure one rollout: the writer and monitors (workload.Recorder) and the deletion
// auditor, started together after the fault has settled so that the figures are the rollout's.
type Instruments struct {
	Recorder *workload.Recorder
	// Settled is what the cluster looked like when the instruments started.
	Settled workload.Settled
	// Warm is when the instruments first saw a quorum and an acknowledged write: figures count
	// from then.
	Warm      time.Time
	auditor   *stack.DeletionAuditor
	bumped    time.Time
	idleEnded time.Time
	stopped   bool
}

// InstrumentOptions configures StartInstruments.
type InstrumentOptions struct {
	Writer workload.WriterOptions
	// QuorumLost: the fault took the quorum away, so there is no leader to settle on and no
	// quorum to warm up against; the instruments start at once.
	QuorumLost bool
	// Concurrency is the OnDelete controller's maxConcurrentMemberUpdates, for the deletion
	// auditor (0: one at a time).
	Concurrency int
}

// StartInstruments waits until the cluster has settled after a fault (a stable leader a quorum
// agrees on, workload.WaitSettled), then starts a writer, the quorum and leader monitors
// (readiness by /readyz) and the deletion auditor, and waits until they work.
func StartInstruments(ctx context.Context, c *stack.EtcdCluster, o InstrumentOptions) (*Instruments, error) {
	in := &Instruments{}
	if !o.QuorumLost {
		settled, err := workload.WaitSettled(ctx, c.Endpoints(), c.PKI.ClientMaterial(), workload.SettleOptions{Expected: c.Replicas})
		if err != nil {
			return nil, fmt.Errorf("waiting for the fault to settle: %w", err)
		}
		in.Settled = settled
	}
	rec, err := workload.NewRecorder(c.Endpoints(), c.PKI.ClientMaterial(), workload.RecorderOptions{
		Expected: c.Replicas,
		Writer:   o.Writer,
		Quorum:   workload.QuorumOptions{Probe: workload.ProbeReadyz},
	})
	if err != nil {
		return nil, fmt.Errorf("preparing the recorder: %w", err)
	}
	if err := rec.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the recorder: %w", err)
	}
	in.Recorder = rec
	auditor, err := c.AuditDeletions(ctx, o.Concurrency, rec.Quorum())
	if err != nil {
		_, _ = rec.Stop(ctx)
		return nil, fmt.Errorf("watching deletions: %w", err)
	}
	in.auditor = auditor
	in.Warm = time.Now()
	if !o.QuorumLost {
		if in.Warm, err = rec.WaitWarm(ctx, 30*time.Second); err != nil {
			in.Stop(10 * time.Second)
			return nil, fmt.Errorf("warming up the instruments: %w", err)
		}
	}
	return in, nil
}

// IdleEnd records the end of the idle baseline when a scenario acts between it and the bump;
// Bumped records when the rollout began (the idle baseline ends there unless IdleEnd said so).
func (in *Instruments) IdleEnd(at time.Time) { in.idleEnded = at }
func (in *Instruments) Bumped(at time.Time)  { in.bumped = at }

// BumpedAt is when the rollout began, zero before.
func (in *Instruments) BumpedAt() time.Time { return in.bumped }

func (in *Instruments) idleEnd() time.Time {
	if !in.idleEnded.IsZero() {
		return in.idleEnded
	}
	return in.bumped
}

// Stop stops the instruments, the recorder within budget (its audit of the acknowledged writes
// waits for a linearizable read), and returns what they measured, the rollout's time aside (the
// runner knows it). Only the first call measures.
func (in *Instruments) Stop(budget time.Duration) Result {
	if in.stopped {
		return Result{}
	}
	in.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var res Result
	res.Report, res.RecorderErr = in.Recorder.Stop(ctx)
	res.Report = res.Report.Since(in.Warm)
	res.Deletions, res.AuditErr = in.auditor.Stop()
	res.Settled, res.Bumped = in.Settled, in.bumped
	if !in.bumped.IsZero() {
		res.IdleJitterMs = res.Report.LongestWriteGapWithin(in.Warm, in.idleEnd())
		// The rollout's figures: whatever a scenario did with the instruments running before the
		// bump (the stale-role scenario moves leadership) is not the rollout's.
		res.Report = res.Report.Since(in.bumped)
	}
	res.LeaderStepGapMs = res.Report.LeaderStepGapMs()
	res.fill()
	return res
}
