package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is how one system is drawn in the chart.
type series struct {
	system string
	label  string
	color  color.Color
	glyph  draw.GlyphDrawer
}

var chartSeries = []series{
	{sysS3lock, "s3lock: waiting Acquire (SDK)", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, draw.CircleGlyph{}},
	{sysTerraform, "Terraform native S3 lock (use_lockfile)", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, draw.TriangleGlyph{}},
}

// drawHandoffChart draws the handoff after a release against the hold time:
// one line per system through the median of its runs (labelled with it),
// every run as a small point, time on a log scale. The image format follows
// path's extension (.png, .svg).
func drawHandoffChart(path string, holds []time.Duration, hs []handoff) error {
	p := plot.New()
	p.Title.Text = "Handoff after the holder releases the lock (lower is better)"
	// Short axis labels: gonum shrinks the data area to fit them.
	p.X.Label.Text = "hold time (s)"
	p.Y.Label.Text = "handoff (s, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(holdTicks(holds))
	p.X.Min, p.X.Max = 0, holds[len(holds)-1].Seconds()*1.12
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(12), -vg.Points(6)
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), 0.0
	for _, s := range chartSeries {
		runs := bySystem(hs, s.system)
		if len(runs) == 0 {
			continue
		}
		for _, h := range runs {
			lo, hi = min(lo, h.gap.Seconds()), max(hi, h.gap.Seconds())
		}
		if err := addSeries(p, s, holds, runs); err != nil {
			return err
		}
	}
	if hi == 0 {
		return fmt.Errorf("no handoff to draw in %s", path)
	}
	p.Y.Min, p.Y.Max = lo/2, hi*3 // room for the labels and the legend
	p.Y.Tick.Marker = plot.ConstantTicks(logTicks(p.Y.Min, p.Y.Max))
	if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("drawing %s: %w", path, err)
	}
	return nil
}

func addSeries(p *plot.Plot, s series, holds []time.Duration, runs []handoff) error {
	var medians, all plotter.XYs
	var labels []string
	for _, hold := range holds {
		var gaps []time.Duration
		for _, h := range runs {
			if h.hold == hold {
				gaps = append(gaps, h.gap)
				all = append(all, plotter.XY{X: hold.Seconds(), Y: h.gap.Seconds()})
			}
		}
		if len(gaps) > 0 {
			m := median(gaps)
			medians = append(medians, plotter.XY{X: hold.Seconds(), Y: m.Seconds()})
			labels = append(labels, seconds(m))
		}
	}
	line, points, err := plotter.NewLinePoints(medians)
	if err != nil {
		return err
	}
	line.Color, line.Width = s.color, vg.Points(2)
	points.Color, points.Shape, points.Radius = s.color, s.glyph, vg.Points(4)
	each, err := plotter.NewScatter(all)
	if err != nil {
		return err
	}
	each.Color, each.Shape, each.Radius = s.color, draw.CrossGlyph{}, vg.Points(3)
	text, err := plotter.NewLabels(plotter.XYLabels{XYs: medians, Labels: labels})
	if err != nil {
		return err
	}
	text.Offset = vg.Point{X: vg.Points(7), Y: vg.Points(4)}
	p.Add(line, points, each, text)
	p.Legend.Add(s.label, line, points)
	return nil
}

// holdTicks marks the hold times measured.
func holdTicks(holds []time.Duration) []plot.Tick {
	ticks := []plot.Tick{{Value: 0, Label: "0"}}
	for _, h := range holds {
		ticks = append(ticks, plot.Tick{Value: h.Seconds(), Label: strconv.Itoa(int(h.Seconds()))})
	}
	return ticks
}

// logTicks labels 1, 2 and 5 of every decade within [lo, hi], and marks
// the other integers of each decade unlabelled.
func logTicks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for decade := math.Pow10(int(math.Floor(math.Log10(lo)))); decade <= hi; decade *= 10 {
		for i := 1; i < 10; i++ {
			v := decade * float64(i)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if i == 1 || i == 2 || i == 5 {
				t.Label = strconv.FormatFloat(v, 'g', 3, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
