package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
)

func TestWriteTimelinePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.png")
	rows := []report.Timeline{
		{Strategy: report.StrategyRollingUpdate, Completed: true, RolloutSeconds: 8, Members: []string{"etcd-0", "etcd-1"}, Start: -1, End: 9,
			Participation: []report.Span{{Member: "etcd-1", From: -1, To: 2}, {Member: "etcd-0", From: 5, To: 9}},
			Deletions:     []report.Mark{{Member: "etcd-1", At: 2}}, Latencies: []report.Point{{At: 0, Ms: 3}, {At: 3, Ms: 1500}}},
		{Strategy: report.StrategyRollingUpdateMaxUnavailable, RolloutSeconds: 30, Members: []string{"etcd-0", "etcd-1"}, Start: -1, End: 30},
	}
	if err := writeTimelinePNG(path, "test", rows); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 8 || string(data[1:4]) != "PNG" {
		t.Errorf("%s is not a PNG (%d bytes)", path, len(data))
	}
	if err := writeTimelinePNG(path, "empty", nil); err == nil {
		t.Error("no timelines: want an error")
	}
}

// TestRunDrawsTheFigureTheBenchmarkWrote goes through the file the benchmark leaves behind.
func TestRunDrawsTheFigureTheBenchmarkWrote(t *testing.T) {
	dir := t.TempDir()
	figure := report.TimelineFigure{Title: "3 members, one dead", Rows: []report.Timeline{
		{Strategy: report.StrategyRollingUpdate, Completed: true, RolloutSeconds: 8, Members: []string{"etcd-0"}, Start: -1, End: 9,
			Participation: []report.Span{{Member: "etcd-0", From: -1, To: 9}}, Latencies: []report.Point{{At: 0, Ms: 3}}}}}
	if err := report.WriteTimelineFigure(filepath.Join(dir, report.TimelineFile), figure); err != nil {
		t.Fatal(err)
	}
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(dir, "rollout.png")); err != nil || info.Size() == 0 {
		t.Fatalf("rollout.png: %v", err)
	}
	if err := run(t.TempDir()); err == nil {
		t.Error("a directory without the figure: want an error")
	}
}
