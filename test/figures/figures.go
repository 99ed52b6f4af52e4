// Package figures holds the numbers one rollout scenario measured, in the one shape the e2e
// scenarios assert, the benchmark records (rollout.json) and the helm e2e and the demo print,
// and their spread over repeated runs. It depends on nothing but the standard library, so the
// plotting module (test/bench/plot) can read the benchmark's files without the stack.
package figures

import "sort"

// Rollout is what one rollout measured, counted from the image bump on. The JSON names are
// rollout.json's (test/bench/report.Run embeds Rollout).
type Rollout struct {
	// QuorumLossMs is proven by the members' own refusals (not ready, no leader, refused);
	// QuorumUnconfirmedMs is time a quorum was not confirmed only because probes ran into the
	// client's deadline (a busy host), reported apart and never dropped.
	QuorumLossMs        int64 `json:"quorumLossMs"`
	QuorumUnconfirmedMs int64 `json:"quorumUnconfirmedMs"`
	ProbeTimeouts       int   `json:"probeTimeouts"`
	ProbeRefusals       int   `json:"probeRefusals"`
	LongestWriteGapMs   int64 `json:"longestWriteGapMs"`
	// LeaderStepGapMs is the longest write gap around a leader change; IdleJitterMs the longest
	// write gap in the idle window before the bump, in the same run.
	LeaderStepGapMs int64 `json:"leaderStepGapMs"`
	IdleJitterMs    int64 `json:"idleJitterMs"`
	FailedWrites    int   `json:"failedWrites"`
	// WriteTimeouts and WriteRefusals split FailedWrites: the client's deadline, or a member's error.
	WriteTimeouts   int `json:"writeTimeouts"`
	WriteRefusals   int `json:"writeRefusals"`
	AckedWrites     int `json:"ackedWrites"`
	LostAckedWrites int `json:"lostAckedWrites"`
	// AuditError is set when the acknowledged writes could not be read back; LostAckedWrites
	// is then meaningless.
	AuditError     string `json:"auditError,omitempty"`
	LeaderChanges  int    `json:"leaderChanges"`
	TermIncrements uint64 `json:"termIncrements"`
	// RolloutSeconds: image bump to every pod updated and participating; for a run that did
	// not complete, the time until the runner gave up.
	RolloutSeconds float64 `json:"rolloutSeconds"`
}

// Stat is the spread of one figure over repeated runs.
type Stat struct {
	N                int
	Median, Min, Max float64
}

// Summarize returns the median, min and max of values (N is 0 for none).
func Summarize(values []float64) Stat {
	if len(values) == 0 {
		return Stat{}
	}
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	n := len(v)
	med := v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return Stat{N: n, Median: med, Min: v[0], Max: v[n-1]}
}
