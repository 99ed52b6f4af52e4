package e2e

import (
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/etcd-conductor/etcd-conductor/test/figures"
)

// measured collects every run's figures by scenario, for the spread printed when a scenario ran
// more than once (go test -count=N, make soak).
var measured struct {
	mu   sync.Mutex
	runs map[string][]figures.Rollout
}

func recordFigures(scenario string, f figures.Rollout) {
	measured.mu.Lock()
	defer measured.mu.Unlock()
	if measured.runs == nil {
		measured.runs = map[string][]figures.Rollout{}
	}
	measured.runs[scenario] = append(measured.runs[scenario], f)
}

// printSpread writes min/median/max of each figure for every scenario that ran at least twice.
func printSpread(w io.Writer) {
	measured.mu.Lock()
	defer measured.mu.Unlock()
	var names []string
	for name, runs := range measured.runs {
		if len(runs) > 1 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	columns := []struct {
		title string
		value func(figures.Rollout) float64
		unit  string
	}{
		{"rollout", func(f figures.Rollout) float64 { return f.RolloutSeconds }, "s"},
		{"quorum loss", func(f figures.Rollout) float64 { return float64(f.QuorumLossMs) }, "ms"},
		{"unconfirmed (timeouts)", func(f figures.Rollout) float64 { return float64(f.QuorumUnconfirmedMs) }, "ms"},
		{"longest write gap", func(f figures.Rollout) float64 { return float64(f.LongestWriteGapMs) }, "ms"},
		{"gap at leader step", func(f figures.Rollout) float64 { return float64(f.LeaderStepGapMs) }, "ms"},
		{"idle jitter", func(f figures.Rollout) float64 { return float64(f.IdleJitterMs) }, "ms"},
		{"failed writes", func(f figures.Rollout) float64 { return float64(f.FailedWrites) }, ""},
		{"leader changes", func(f figures.Rollout) float64 { return float64(f.LeaderChanges) }, ""},
	}
	fmt.Fprintf(w, "\n=== spread per scenario: min / median / max over the runs ===\n")
	fmt.Fprintf(w, "%-24s %4s", "scenario", "runs")
	for _, c := range columns {
		fmt.Fprintf(w, "  %-22s", c.title)
	}
	fmt.Fprintln(w)
	for _, name := range names {
		runs := measured.runs[name]
		fmt.Fprintf(w, "%-24s %4d", name, len(runs))
		for _, c := range columns {
			values := make([]float64, len(runs))
			for i, r := range runs {
				values[i] = c.value(r)
			}
			st := figures.Summarize(values)
			format := "%.0f"
			if c.unit == "s" {
				format = "%.1f"
			}
			cell := fmt.Sprintf(format+" / "+format+" / "+format+"%s", st.Min, st.Median, st.Max, c.unit)
			fmt.Fprintf(w, "  %-22s", cell)
		}
		fmt.Fprintln(w)
	}
}
