package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// palette is the plots' immutable colour table, shared with the page's CSS
// so a phase has one colour everywhere.
var palette = map[string]color.RGBA{
	"load":   {0x6c, 0x8e, 0xbf, 0xff},
	"attach": {0xd9, 0x82, 0x2b, 0xff},
	"detach": {0x4e, 0x9a, 0x6b, 0xff},
	"p50":    {0x9e, 0xc5, 0xe8, 0xff},
	"p90":    {0x4a, 0x86, 0xc5, 0xff},
	"p99":    {0x1d, 0x3f, 0x72, 0xff},
	"quiet":  {0x4a, 0x86, 0xc5, 0xff},
	"storm":  {0xc6, 0x28, 0x28, 0xff},
	"other":  {0x88, 0x88, 0x88, 0xff},
}

func phaseColor(name string) color.Color {
	if c, ok := palette[name]; ok {
		return c
	}
	return palette["other"]
}

// phaseOrder puts the agent's phases in the order they run; unknown ones
// follow by name.
func phaseOrder(phases map[string]*event.Phase) []string {
	rank := map[string]int{"load": 1, "attach": 2, "detach": 3}
	var names []string
	for n, p := range phases {
		if p != nil && p.Latency.Count > 0 {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := rank[names[i]], rank[names[j]]
		if ri == 0 {
			ri = 99
		}
		if rj == 0 {
			rj = 99
		}
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}

// figure is a plot with its size and an accessible label.
type figure struct {
	p     *plot.Plot
	w, h  vg.Length
	label string
}

// svg renders f into an inline <svg> element ("" for no figure): the XML
// prolog and the generator comment go, a class and the label come in.
func (f *figure) svg() (template.HTML, error) {
	if f == nil {
		return "", nil
	}
	p, w, h, label := f.p, f.w, f.h, f.label
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", fmt.Errorf("plot %q: write SVG: %w", label, err)
	}
	s := b.String()
	i := strings.Index(s, "<svg ")
	if i < 0 {
		return "", fmt.Errorf("plot %q: gonum wrote no <svg> element", label)
	}
	s = `<svg class="plot" role="img" aria-label="` + template.HTMLEscapeString(label) + `" ` + s[i+len("<svg "):]
	// The SVG comes from gonum's own writer, which escapes every text it
	// draws; the label is escaped above.
	return template.HTML(s), nil
}

// ms converts a Duration to float milliseconds, kept above zero so a log
// axis can hold it.
func ms(d event.Duration) float64 {
	return math.Max(float64(d)/1e6, 1e-3)
}

// percentileBoxes draws one latency distribution per phase from the
// percentiles result.json keeps: a whisker from min to max, a box from the
// median to p90 (there are no quartiles to draw a classic box from), a thick
// median line and a diamond at p99.
type percentileBoxes struct {
	names []string
	lats  []event.Latency
	width vg.Length
}

// Plot implements plot.Plotter.
func (b percentileBoxes) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	for i, l := range b.lats {
		x := trX(float64(i))
		col := phaseColor(b.names[i])
		thin := draw.LineStyle{Color: col, Width: vg.Points(1)}
		c.StrokeLine2(thin, x, trY(ms(l.Min)), x, trY(ms(l.Median)))
		c.StrokeLine2(thin, x, trY(ms(l.P90)), x, trY(ms(l.Max)))
		for _, v := range []event.Duration{l.Min, l.Max} {
			c.StrokeLine2(thin, x-b.width/4, trY(ms(v)), x+b.width/4, trY(ms(v)))
		}
		lo, hi := trY(ms(l.Median)), trY(ms(l.P90))
		box := []vg.Point{{X: x - b.width/2, Y: lo}, {X: x + b.width/2, Y: lo}, {X: x + b.width/2, Y: hi}, {X: x - b.width/2, Y: hi}}
		// A translucent fill keeps the grid and the median line readable.
		var fill color.Color = color.White
		if rgba, ok := col.(color.RGBA); ok {
			fill = color.NRGBA{rgba.R, rgba.G, rgba.B, 0x55}
		}
		c.FillPolygon(fill, c.ClipPolygonY(box))
		c.StrokeLines(thin, c.ClipLinesY(append(box, box[0]))...)
		c.StrokeLine2(draw.LineStyle{Color: col, Width: vg.Points(3)}, x-b.width/2, lo, x+b.width/2, lo)
		c.DrawGlyph(draw.GlyphStyle{Color: col, Radius: vg.Points(4), Shape: draw.PyramidGlyph{}}, vg.Point{X: x, Y: trY(ms(l.P99))})
	}
}

// DataRange implements plot.DataRanger.
func (b percentileBoxes) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = math.Inf(1), math.Inf(-1)
	for _, l := range b.lats {
		ymin = math.Min(ymin, ms(l.Min))
		ymax = math.Max(ymax, ms(l.Max))
	}
	return -0.5, float64(len(b.lats)) - 0.5, ymin, ymax
}

// latencyFigure is a cell's per-phase latency chart, nil when the cell has
// no phase with operations.
func latencyFigure(cell string, phases map[string]*event.Phase) *figure {
	names := phaseOrder(phases)
	if len(names) == 0 {
		return nil
	}
	b := percentileBoxes{names: names, width: vg.Points(28)}
	labels := make([]string, len(names))
	for i, n := range names {
		l := phases[n].Latency
		b.lats = append(b.lats, l)
		labels[i] = fmt.Sprintf("%s (n=%d)", n, l.Count)
	}
	p := newPlot("Per-operation latency", axis{}, axis{label: "ms (log)", log: true})
	p.Add(b)
	p.NominalX(labels...)
	p.X.Padding = 0
	return &figure{p, vg.Points(90 + 110*float64(len(names))), vg.Points(260), cell + ": per-phase latency, median to p90 box, min to max whiskers, p99 marker"}
}

// percentileBars compares the attach (or detach) percentiles of every cell
// of a run: horizontal bars, one group per cell; nil when no cell has the
// phase.
func percentileBars(run *results.Run, phase string) (*figure, error) {
	var cells []string
	var p50, p90, p99 plotter.Values
	for _, c := range run.Cells {
		ph := c.Result.Phases[phase]
		if ph == nil || ph.Latency.Count == 0 {
			continue
		}
		cells = append(cells, c.Result.Cell)
		p50 = append(p50, ms(ph.Latency.Median))
		p90 = append(p90, ms(ph.Latency.P90))
		p99 = append(p99, ms(ph.Latency.P99))
	}
	if len(cells) == 0 {
		return nil, nil
	}
	p := newPlot(phase+" latency by cell", axis{label: "ms"}, axis{})
	w := vg.Points(7)
	for i, s := range []struct {
		name string
		vals plotter.Values
	}{{"p50", p50}, {"p90", p90}, {"p99", p99}} {
		bars, err := plotter.NewBarChart(s.vals, w)
		if err != nil {
			return nil, fmt.Errorf("%s bars: %w", phase, err)
		}
		bars.Horizontal = true
		bars.Color = palette[s.name]
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(1-i)
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	// Room on the right keeps the legend off the longest bar.
	p.X.Min, p.X.Max = 0, 1.3*slices.Max(p99)
	p.Legend.Top = true
	p.NominalY(cells...)
	h := vg.Points(90 + 30*float64(len(cells)))
	return &figure{p, vg.Points(560), h, phase + " latency percentiles (p50, p90, p99) of every cell"}, nil
}

// progressFigure plots each phase's completed operations over time from the
// agent's progress events: a stall or a slowdown shows as a bend. nil when
// there are too few events to draw a line.
func progressFigure(c results.Cell) (*figure, error) {
	if len(c.Progress) < 2 {
		return nil, nil
	}
	start := c.ProgressAt[0]
	series := map[string]plotter.XYs{}
	var order []string
	for i, pr := range c.Progress {
		if _, ok := series[pr.Phase]; !ok {
			order = append(order, pr.Phase)
		}
		series[pr.Phase] = append(series[pr.Phase], plotter.XY{X: c.ProgressAt[i].Sub(start).Seconds(), Y: float64(pr.Done)})
	}
	p := newPlot("Progress", axis{label: "seconds since the first progress event"}, axis{label: "operations done"})
	for _, name := range order {
		line, err := plotter.NewLine(series[name])
		if err != nil {
			return nil, fmt.Errorf("progress of %s: %w", name, err)
		}
		line.LineStyle.Color = phaseColor(name)
		line.LineStyle.Width = vg.Points(2)
		p.Add(line)
		p.Legend.Add(name, line)
	}
	// Every line climbs to the right, so the bottom right corner is free.
	return &figure{p, vg.Points(420), vg.Points(260), c.Result.Cell + ": operations completed over time per phase"}, nil
}

// axis is one axis of a plot: its label, and whether it is logarithmic.
type axis struct {
	label string
	log   bool
}

// newPlot is a plot with a title, two axes and a grid, the way every
// figure of the report starts.
func newPlot(title string, x, y axis) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	for _, a := range []struct {
		axis
		to *plot.Axis
	}{{x, &p.X}, {y, &p.Y}} {
		a.to.Label.Text = a.label
		if a.log {
			a.to.Scale = plot.LogScale{}
			a.to.Tick.Marker = plot.LogTicks{Prec: -1}
		}
	}
	p.Add(plotter.NewGrid())
	return p
}
