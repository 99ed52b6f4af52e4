package scenario

import (
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/figures"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
	"github.com/etcd-conductor/etcd-conductor/test/workload"
)

// Result is what one rollout scenario measured: its figures, the detail behind them and whatever
// kept a part of it from being measured. The e2e scenarios assert it, the benchmark records it
// and the helm e2e and the demo print it.
type Result struct {
	figures.Rollout
	// Completed: every member runs the final image's revision and is ready. Note says why not.
	Completed bool
	Note      string
	Bumped    time.Time
	// Duration is RolloutSeconds as a duration, from the bump to completion or giving up.
	Duration time.Duration
	// Settled is what the cluster looked like when the instruments started.
	Settled workload.Settled
	// Report is every sample the instruments took, counted from the bump on.
	Report      workload.Report
	RecorderErr error
	Deletions   []stack.Deletion
	AuditErr    error
	// Events are the Events the scenario waited for (Spec.WantEvents), "reason: message", by the
	// reason asked for; none under a reason means none arrived within EventDelivery.
	Events map[string][]string
}

// fill copies the report's figures into the flat ones. IdleJitterMs and LeaderStepGapMs are set
// before, RolloutSeconds after.
func (r *Result) fill() {
	rep := r.Report
	r.QuorumLossMs, r.QuorumUnconfirmedMs = rep.QuorumLossMs, rep.QuorumUnconfirmedMs
	r.ProbeTimeouts, r.ProbeRefusals = rep.ProbeTimeouts, rep.ProbeRefusals
	r.LongestWriteGapMs = rep.LongestWriteGapMs
	r.FailedWrites, r.WriteTimeouts, r.WriteRefusals = rep.FailedWrites, rep.WriteTimeouts, rep.WriteRefusals
	r.AckedWrites, r.LostAckedWrites, r.AuditError = rep.AckedWrites, rep.LostAckedWrites, rep.AuditError
	r.LeaderChanges, r.TermIncrements = rep.LeaderChanges, rep.TermIncrements
}

// setDuration records how long the rollout took.
func (r *Result) setDuration(d time.Duration) {
	r.Duration, r.RolloutSeconds = d, d.Seconds()
}
