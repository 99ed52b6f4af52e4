// Package report holds what the rollout benchmark writes: the raw runs (rollout.json), their
// summary per scenario and strategy (rollout.md) and the timeline picture (rollout.png). It only
// shapes numbers it is given; measuring is the bench command's job.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/etcd-conductor/etcd-conductor/test/figures"
)

// Scenario and strategy ids, as the issue names them and rollout.json carries them.
const (
	StrategyRollingUpdate               = "rolling-update"
	StrategyRollingUpdateMaxUnavailable = "rolling-update-maxunavailable"
	StrategyOnDeleteLease               = "ondelete-lease"
	StrategyOnDeleteDirect              = "ondelete-direct"
	// StrategyOnDeleteConcurrent is ours with several participating members replaced at once,
	// within the quorum's headroom (maxConcurrentMemberUpdates).
	StrategyOnDeleteConcurrent = "ondelete-concurrent"

	// ScenarioStaleRole ends the id of the stale-role scenarios ("3-stale-role", ...).
	ScenarioStaleRole = "stale-role"
)

// IsStaleRole says whether a scenario id is one of the stale-role scenarios.
func IsStaleRole(scenario string) bool { return strings.HasSuffix(scenario, ScenarioStaleRole) }

// Ours says whether a strategy is this operator's.
func Ours(strategy string) bool {
	return strategy == StrategyOnDeleteDirect || strategy == StrategyOnDeleteConcurrent || strategy == StrategyOnDeleteLease
}

// Results is rollout.json.
type Results struct {
	Date    string  `json:"date"`
	Machine Machine `json:"machine"`
	Reps    int     `json:"reps"`
	// WallSeconds is how long the whole benchmark took, stack start-up included.
	WallSeconds float64  `json:"wallSeconds"`
	Settings    Settings `json:"settings"`
	Runs        []Run    `json:"runs"`
}

// Machine says where the figures came from.
type Machine struct {
	CPUs      int     `json:"cpus"`
	CPUModel  string  `json:"cpuModel,omitempty"`
	MemoryGiB float64 `json:"memoryGiB"`
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"goVersion"`
	// LoadAtStart and LoadAtEnd are /proc/loadavg's 1-minute figure: how busy the machine was
	// besides the benchmark (it takes about one core itself).
	LoadAtStart float64 `json:"loadAtStart,omitempty"`
	LoadAtEnd   float64 `json:"loadAtEnd,omitempty"`
	Note        string  `json:"note,omitempty"`
}

func (m Machine) String() string {
	model := ""
	if m.CPUModel != "" {
		model = " (" + m.CPUModel + ")"
	}
	s := fmt.Sprintf("%d CPUs%s, %.1f GiB memory, Linux %s, %s", m.CPUs, model, m.MemoryGiB, m.Kernel, m.GoVersion)
	if m.LoadAtStart > 0 || m.LoadAtEnd > 0 {
		s += fmt.Sprintf(", load average %.1f at the start and %.1f at the end", m.LoadAtStart, m.LoadAtEnd)
	}
	if m.Note != "" {
		s += "; " + m.Note
	}
	return s
}

// Settings are the knobs a reader needs to compare two result files.
type Settings struct {
	FromImage string `json:"fromImage"`
	ToImage   string `json:"toImage"`
	// WriteRate is the writer's target Puts per second; WriteTimeoutMs its per-attempt deadline.
	WriteRate      float64 `json:"writeRate"`
	WriteTimeoutMs int64   `json:"writeTimeoutMs"`
	QuorumProbe    string  `json:"quorumProbe"`
	// IdleBaselineSeconds is the window before each bump with the instruments running and no
	// rollout; its longest write gap is that run's idle jitter.
	IdleBaselineSeconds float64 `json:"idleBaselineSeconds"`
	// StallSeconds: a rollout that makes no progress (no pod updated or becoming ready, none
	// terminating) for this long is recorded as not completed; TimeoutSeconds bounds any rollout.
	StallSeconds   float64 `json:"stallSeconds"`
	TimeoutSeconds float64 `json:"timeoutSeconds"`
	// StaleRoleLeaseRenewal is the member agents' lease renewal interval in the stale-role
	// scenario (leases stay valid for 15 s).
	StaleRoleLeaseRenewal string `json:"staleRoleLeaseRenewal"`
}

// Run is one rollout of one scenario under one strategy.
type Run struct {
	Scenario  string `json:"scenario"`
	Strategy  string `json:"strategy"`
	Rep       int    `json:"rep"`
	Completed bool   `json:"completed"`
	// Note says why a run did not complete, or what else went wrong while measuring.
	Note string `json:"note,omitempty"`

	// The rollout's figures, under their own names in rollout.json.
	figures.Rollout

	// Controller decisions. Deletions and ParticipatingDeletions come from watching the pods
	// (any controller). InvariantViolations counts deletions of a participating pod while
	// another was terminating, missing, or updated but not participating (DEP-07); only for our
	// controller, which deletes after the StatefulSet status names the new revision (the
	// StatefulSet controller deletes before, so the watcher's "updated" would be stale).
	Deletions              int `json:"deletions"`
	ParticipatingDeletions int `json:"participatingDeletions"`
	InvariantViolations    int `json:"invariantViolations"`
	// Decisions are the OnDelete controller's own counters ("delete <rule>", "wait <rule>").
	Decisions map[string]int `json:"decisions,omitempty"`
	// LeaderDeletedWhileFollowersRemained is set for the stale-role scenario: deletions of the
	// member that was the raft leader at that moment while an outdated participating follower
	// was still there to delete instead.
	LeaderDeletedWhileFollowersRemained *int `json:"leaderDeletedWhileFollowersRemained,omitempty"`

	DeletionLog []DeletionRecord `json:"deletionLog,omitempty"`
}

// DeletionRecord is one pod deletion, relative to the image bump.
type DeletionRecord struct {
	AtSeconds     float64 `json:"atSeconds"`
	Pod           string  `json:"pod"`
	Participating bool    `json:"participating"`
	// Leader is the raft leader the members reported just before the deletion.
	Leader    string `json:"leader,omitempty"`
	Violation string `json:"violation,omitempty"`
	// RejoinedByProbe are updated pods not Ready yet whose /readyz passed at the deletion (the
	// controller counted them back by its own read: rejoinByRead).
	RejoinedByProbe []string `json:"rejoinedByProbe,omitempty"`
}

// WriteJSON writes the results indented, so a diff between two runs is readable.
func WriteJSON(path string, r Results) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ReadJSON reads a rollout.json, e.g. of a benchmark still running or stopped part-way.
func ReadJSON(path string) (Results, error) {
	var r Results
	data, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("reading results: %w", err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("decoding %s: %w", path, err)
	}
	return r, nil
}
