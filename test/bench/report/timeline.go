package report

import (
	"encoding/json"
	"fmt"
	"os"
)

// TimelineFile is the figure the benchmark leaves for the plot module (test/bench/plot, its own
// Go module so the plotting library stays out of the operator's go.mod) to draw as rollout.png.
const TimelineFile = "rollout-timeline.json"

// TimelineFigure is what rollout.png shows: one row per strategy.
type TimelineFigure struct {
	Title string     `json:"title"`
	Rows  []Timeline `json:"rows"`
}

// WriteTimelineFigure writes the figure as JSON for test/bench/plot.
func WriteTimelineFigure(path string, f TimelineFigure) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding timeline figure: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ReadTimelineFigure reads what WriteTimelineFigure wrote.
func ReadTimelineFigure(path string) (TimelineFigure, error) {
	var f TimelineFigure
	data, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("decoding %s: %w", path, err)
	}
	return f, nil
}

// Timeline is one run as the picture shows it. Times are seconds relative to the image bump
// (negative: the baseline before it).
type Timeline struct {
	Strategy  string
	Completed bool
	// RolloutSeconds is when the rollout completed (or the benchmark gave up).
	RolloutSeconds float64
	// Members name the lanes, bottom to top.
	Members       []string
	Participation []Span
	Deletions     []Mark
	Latencies     []Point
	FailedWrites  int
	Start, End    float64
}

// Span is a member serving linearizable reads from From to To.
type Span struct {
	Member   string
	From, To float64
}

// Mark is a pod deletion.
type Mark struct {
	Member string
	At     float64
}

// Point is one acknowledged write and how long the client waited for it.
type Point struct {
	At, Ms float64
}
