// Command plot draws the benchmark's timeline figure (rollout-timeline.json, written by
// test/bench) as rollout.png. It is its own Go module so that the plotting library is not a
// dependency of the operator: `make bench` runs it after the benchmark.
package main

import (
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/etcd-conductor/etcd-conductor/test/bench/report"
)

func main() {
	dir := flag.String("dir", "", "results directory holding "+report.TimelineFile+"; rollout.png is written next to it")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintf(os.Stderr, "plot: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if dir == "" {
		return fmt.Errorf("-dir is required")
	}
	figure, err := report.ReadTimelineFigure(filepath.Join(dir, report.TimelineFile))
	if err != nil {
		return err
	}
	out := filepath.Join(dir, "rollout.png")
	if err := writeTimelinePNG(out, figure.Title, figure.Rows); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", out)
	return nil
}

var (
	participatingColor = color.RGBA{R: 46, G: 139, B: 87, A: 255}
	laneColor          = color.RGBA{R: 220, G: 220, B: 220, A: 255}
	deletionColor      = color.RGBA{R: 200, G: 30, B: 30, A: 255}
	latencyColor       = color.RGBA{R: 30, G: 90, B: 180, A: 255}
	markerColor        = color.RGBA{R: 90, G: 90, B: 90, A: 255}
)

// writeTimelinePNG draws one row per timeline: member participation lanes with the deletions
// on the left, write latency (log scale) on the right, all on one time axis so the rows compare.
func writeTimelinePNG(path, title string, timelines []report.Timeline) error {
	if len(timelines) == 0 {
		return fmt.Errorf("no timeline to draw")
	}
	start, end := 0.0, 1.0
	for _, t := range timelines {
		start, end = math.Min(start, t.Start), math.Max(end, t.End)
	}
	rows := make([][]*plot.Plot, 0, len(timelines))
	for i, t := range timelines {
		lanes, err := participationPlot(t, start, end, i == 0)
		if err != nil {
			return err
		}
		latency, err := latencyPlot(t, start, end)
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{lanes, latency})
	}

	const rowHeight = 2.3 * vg.Inch
	width := 13 * vg.Inch
	height := rowHeight*vg.Length(len(rows)) + 0.5*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(100))
	dc := draw.New(img)
	dc.FillText(text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 14), XAlign: draw.XLeft, YAlign: draw.YTop,
		Handler: plot.DefaultTextHandler}, vg.Point{X: 0.3 * vg.Inch, Y: height - 0.15*vg.Inch}, title)
	body := draw.Crop(dc, 0, 0, 0, -0.5*vg.Inch)
	tiles := draw.Tiles{Rows: len(rows), Cols: 2, PadX: 0.3 * vg.Inch, PadY: 0.25 * vg.Inch,
		PadTop: 0.1 * vg.Inch, PadBottom: 0.1 * vg.Inch, PadLeft: 0.1 * vg.Inch, PadRight: 0.2 * vg.Inch}
	canvases := plot.Align(rows, tiles, body)
	for i := range rows {
		for j := range rows[i] {
			rows[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

func rowTitle(t report.Timeline) string {
	if t.Completed {
		return fmt.Sprintf("%s: rollout completed in %.1f s", t.Strategy, t.RolloutSeconds)
	}
	return fmt.Sprintf("%s: did NOT complete (gave up after %.1f s)", t.Strategy, t.RolloutSeconds)
}

func participationPlot(t report.Timeline, start, end float64, legend bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = rowTitle(t)
	p.X.Label.Text = "seconds since the image bump"
	p.X.Min, p.X.Max = start, end
	p.Y.Min, p.Y.Max = -0.7, float64(len(t.Members))-0.3
	if legend {
		p.Y.Max += 1.4 // room for the legend above the lanes
	}
	lane := map[string]float64{}
	ticks := make(plot.ConstantTicks, 0, len(t.Members))
	for i, m := range t.Members {
		lane[m] = float64(i)
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: m})
		background, err := segment(start, end, float64(i), laneColor, vg.Points(9))
		if err != nil {
			return nil, err
		}
		p.Add(background)
	}
	p.Y.Tick.Marker = ticks

	var sample *plotter.Line
	for _, s := range t.Participation {
		y, ok := lane[s.Member]
		if !ok || s.To <= s.From {
			continue
		}
		l, err := segment(s.From, s.To, y, participatingColor, vg.Points(9))
		if err != nil {
			return nil, err
		}
		p.Add(l)
		sample = l
	}
	var xys plotter.XYs
	for _, d := range t.Deletions {
		if y, ok := lane[d.Member]; ok {
			xys = append(xys, plotter.XY{X: d.At, Y: y})
		}
	}
	var deletions *plotter.Scatter
	if len(xys) > 0 {
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: deletionColor, Radius: vg.Points(6), Shape: draw.CrossGlyph{}}
		p.Add(s)
		deletions = s
	}
	if err := addVerticals(p, t, p.Y.Min, p.Y.Max); err != nil {
		return nil, err
	}
	if legend {
		p.Legend.Top = true
		p.Legend.Left = true
		if sample != nil {
			p.Legend.Add("participating (linearizable read)", sample)
		}
		if deletions != nil {
			p.Legend.Add("pod deleted by the controller", deletions)
		}
	}
	return p, nil
}

func latencyPlot(t report.Timeline, start, end float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("write latency (%d acknowledged, %d failed attempts)", len(t.Latencies), t.FailedWrites)
	p.X.Label.Text = "seconds since the image bump"
	p.Y.Label.Text = "ms (log)"
	p.X.Min, p.X.Max = start, end
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	lo, hi := 1.0, 10.0
	var xys plotter.XYs
	for _, l := range t.Latencies {
		ms := math.Max(l.Ms, 0.1)
		xys = append(xys, plotter.XY{X: l.At, Y: ms})
		lo, hi = math.Min(lo, ms), math.Max(hi, ms)
	}
	p.Y.Min, p.Y.Max = lo, hi*1.5
	if len(xys) > 0 {
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: latencyColor, Radius: vg.Points(1.2), Shape: draw.CircleGlyph{}}
		p.Add(s)
	}
	if err := addVerticals(p, t, p.Y.Min, p.Y.Max); err != nil {
		return nil, err
	}
	return p, nil
}

// addVerticals marks the bump (0) and the end of the rollout.
func addVerticals(p *plot.Plot, t report.Timeline, ymin, ymax float64) error {
	for _, x := range []float64{0, t.RolloutSeconds} {
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: ymin}, {X: x, Y: ymax}})
		if err != nil {
			return err
		}
		l.LineStyle = draw.LineStyle{Color: markerColor, Width: vg.Points(0.8), Dashes: []vg.Length{vg.Points(3), vg.Points(3)}}
		p.Add(l)
	}
	return nil
}

func segment(from, to, y float64, c color.Color, width vg.Length) (*plotter.Line, error) {
	l, err := plotter.NewLine(plotter.XYs{{X: from, Y: y}, {X: to, Y: y}})
	if err != nil {
		return nil, err
	}
	l.LineStyle = draw.LineStyle{Color: c, Width: width}
	return l, nil
}
