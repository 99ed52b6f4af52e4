package stack

import (
	"context"
	"fmt"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// Instruments measure one rollout: the writer and monitors (workload.Recorder) and the deletion
// auditor, started together after the fault so that the figures are the rollout's.
type Instruments struct {
	Recorder *workload.Recorder
	auditor  *DeletionAuditor
	stopped  bool
}

// Measured is what the instruments saw; an error says a part of it is incomplete.
type Measured struct {
	Report      workload.Report
	RecorderErr error
	Deletions   []Deletion
	AuditErr    error
}

// StartInstruments starts a writer at w's rate, the quorum and leader monitors (readiness by
// /readyz) and the deletion auditor against the cluster.
func (c *EtcdCluster) StartInstruments(ctx context.Context, w workload.WriterOptions) (*Instruments, error) {
	rec, err := workload.NewRecorder(c.Endpoints(), c.PKI.ClientMaterial(), workload.RecorderOptions{
		Expected: c.Replicas,
		Writer:   w,
		Quorum:   workload.QuorumOptions{Probe: workload.ProbeReadyz},
	})
	if err != nil {
		return nil, fmt.Errorf("preparing the recorder: %w", err)
	}
	if err := rec.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the recorder: %w", err)
	}
	auditor, err := c.AuditDeletions(ctx)
	if err != nil {
		_, _ = rec.Stop(ctx)
		return nil, fmt.Errorf("watching deletions: %w", err)
	}
	return &Instruments{Recorder: rec, auditor: auditor}, nil
}

// Stop stops the instruments, the recorder within budget (its audit of the acknowledged writes
// waits for a linearizable read), and returns what they measured. Only the first call measures.
func (in *Instruments) Stop(budget time.Duration) Measured {
	if in.stopped {
		return Measured{}
	}
	in.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var m Measured
	m.Report, m.RecorderErr = in.Recorder.Stop(ctx)
	m.Deletions, m.AuditErr = in.auditor.Stop()
	return m
}
