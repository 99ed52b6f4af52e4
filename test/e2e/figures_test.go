package e2e

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
)

// figures are what one scenario run measured.
type figures struct {
	rollout           time.Duration
	quorumLossMs      int64
	unconfirmedMs     int64
	longestWriteGapMs int64
	leaderStepGapMs   int64
	idleJitterMs      int64
	failedWrites      int
	leaderChanges     int
}

// measured collects every run's figures by scenario, for the spread printed when a scenario ran
// more than once (go test -count=N, make soak).
var measured struct {
	mu   sync.Mutex
	runs map[string][]figures
}

func recordFigures(scenario string, f figures) {
	measured.mu.Lock()
	defer measured.mu.Unlock()
	if measured.runs == nil {
		measured.runs = map[string][]figures{}
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
		value func(figures) float64
		unit  string
	}{
		{"rollout", func(f figures) float64 { return f.rollout.Seconds() }, "s"},
		{"quorum loss", func(f figures) float64 { return float64(f.quorumLossMs) }, "ms"},
		{"unconfirmed (timeouts)", func(f figures) float64 { return float64(f.unconfirmedMs) }, "ms"},
		{"longest write gap", func(f figures) float64 { return float64(f.longestWriteGapMs) }, "ms"},
		{"gap at leader step", func(f figures) float64 { return float64(f.leaderStepGapMs) }, "ms"},
		{"idle jitter", func(f figures) float64 { return float64(f.idleJitterMs) }, "ms"},
		{"failed writes", func(f figures) float64 { return float64(f.failedWrites) }, ""},
		{"leader changes", func(f figures) float64 { return float64(f.leaderChanges) }, ""},
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
			st := report.Summarize(values)
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
