package report

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ftrace-harness/fth/wire/event"
)

// series is one named line of a figure.
type series struct {
	name   string
	xys    plotter.XYs
	color  color.Color
	dashed bool
	points bool
}

// addLines adds each series with at least two points to p, with a legend
// entry. A line needs two points; a series with fewer is left out rather
// than drawn as a lone dot that reads as a curve.
func addLines(p *plot.Plot, ss []series) (int, error) {
	n := 0
	for _, s := range ss {
		if len(s.xys) < 2 {
			continue
		}
		line, err := plotter.NewLine(s.xys)
		if err != nil {
			return n, fmt.Errorf("line %s: %w", s.name, err)
		}
		line.LineStyle.Color = s.color
		line.LineStyle.Width = vg.Points(2)
		if s.dashed {
			line.LineStyle.Width = vg.Points(1)
			line.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(line)
		if s.points {
			sc, err := plotter.NewScatter(s.xys)
			if err != nil {
				return n, fmt.Errorf("points %s: %w", s.name, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: s.color, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
			p.Add(sc)
		}
		p.Legend.Add(s.name, line)
		n++
	}
	return n, nil
}

// scalingFigure plots the total attach and detach seconds against N on
// log-log axes, each with a dashed line for what linear growth from the
// first N would cost. On log-log axes linear growth has slope 1, so a
// curve that pulls away above its dashed line grows faster than linearly:
// the superlinear cost the scaling part is there to expose. nil when fewer
// than two N were measured with a positive time.
func scalingFigure(cell string, pts []event.BenchScalingPoint) (*figure, error) {
	var ss []series
	for _, ph := range []struct {
		name string
		sec  func(event.BenchScalingPoint) float64
	}{
		{"attach", func(p event.BenchScalingPoint) float64 { return p.AttachSeconds }},
		{"detach", func(p event.BenchScalingPoint) float64 { return p.DetachSeconds }},
	} {
		var measured, linear plotter.XYs
		for _, p := range pts {
			// A log axis cannot hold 0: a phase that did not run at an N
			// has no point there.
			if p.N <= 0 || ph.sec(p) <= 0 {
				continue
			}
			measured = append(measured, plotter.XY{X: float64(p.N), Y: ph.sec(p)})
		}
		if len(measured) >= 2 {
			first := measured[0]
			for _, m := range measured {
				linear = append(linear, plotter.XY{X: m.X, Y: first.Y * m.X / first.X})
			}
		}
		ss = append(ss,
			series{name: ph.name, xys: measured, color: phaseColor(ph.name), points: true},
			series{name: ph.name + " if linear", xys: linear, color: phaseColor(ph.name), dashed: true})
	}
	p := newPlot("Attach/detach time against N", axis{label: "N trampolines (log)", log: true}, axis{label: "seconds for all N (log)", log: true})
	if n, err := addLines(p, ss); err != nil || n == 0 {
		return nil, err
	}
	// Every line climbs to the right, so the top left corner is free.
	p.Legend.Top, p.Legend.Left = true, true
	return &figure{p, vg.Points(460), vg.Points(300), cell + ": total attach and detach seconds against N, log-log, dashed lines for linear growth from the first N"}, nil
}

// perOpFigure plots the per-trampoline median and p99 against N: flat
// lines mean each operation costs the same however many are attached. nil
// when fewer than two N were measured.
func perOpFigure(cell string, pts []event.BenchScalingPoint) (*figure, error) {
	var ss []series
	for _, ph := range []struct {
		name string
		lat  func(event.BenchScalingPoint) event.Latency
	}{
		{"attach", func(p event.BenchScalingPoint) event.Latency { return p.Attach }},
		{"detach", func(p event.BenchScalingPoint) event.Latency { return p.Detach }},
	} {
		var med, p99 plotter.XYs
		for _, p := range pts {
			l := ph.lat(p)
			if p.N <= 0 || l.Count == 0 {
				continue
			}
			med = append(med, plotter.XY{X: float64(p.N), Y: float64(l.Median) / 1e6})
			p99 = append(p99, plotter.XY{X: float64(p.N), Y: float64(l.P99) / 1e6})
		}
		ss = append(ss,
			series{name: ph.name + " median", xys: med, color: phaseColor(ph.name), points: true},
			series{name: ph.name + " p99", xys: p99, color: phaseColor(ph.name), dashed: true})
	}
	p := newPlot("Per-trampoline latency against N", axis{label: "N trampolines (log)", log: true}, axis{label: "ms per operation"})
	if n, err := addLines(p, ss); err != nil || n == 0 {
		return nil, err
	}
	// A zero origin keeps a flat line flat-looking: without it gonum zooms
	// into the range and a few percent look like a climb.
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	return &figure{p, vg.Points(460), vg.Points(300), cell + ": per-trampoline attach and detach median and p99 against N"}, nil
}

// wakeupFigure draws the quiet and storm wakeup-latency percentiles side
// by side on a log axis, one line per run: the gap between them is what
// the attach storm costs a real-time thread. nil without both runs.
func wakeupFigure(cell string, w *event.BenchWakeup) (*figure, error) {
	if w.Quiet == nil && w.Storm == nil {
		return nil, nil
	}
	labels := []string{"min", "p50", "p90", "p99", "p99.9", "max"}
	curve := func(s *event.WakeupSummary) plotter.XYs {
		if s == nil {
			return nil
		}
		var xys plotter.XYs
		for i, v := range []float64{s.Min, s.P50, s.P90, s.P99, s.P999, s.Max} {
			// A log axis cannot hold 0; a nanosecond is below any
			// wakeup latency there is.
			xys = append(xys, plotter.XY{X: float64(i), Y: math.Max(v, 1e-3)})
		}
		return xys
	}
	p := newPlot("Wakeup latency", axis{}, axis{label: "µs (log)", log: true})
	n, err := addLines(p, []series{
		{name: "quiet", xys: curve(w.Quiet), color: palette["quiet"], points: true},
		{name: "storm", xys: curve(w.Storm), color: palette["storm"], points: true},
	})
	if err != nil || n == 0 {
		return nil, err
	}
	p.NominalX(labels...)
	p.Legend.Top, p.Legend.Left = true, true
	return &figure{p, vg.Points(380), vg.Points(260), cell + ": wakeup latency percentiles, quiet and during an attach storm"}, nil
}
