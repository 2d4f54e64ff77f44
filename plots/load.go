package plots

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// LoadPoint is one concurrency level of a load run.
type LoadPoint struct {
	Clients   float64 // clients running at once
	DecodeTPS float64 // aggregate generated tokens/s
	ITLP50MS  float64 // inter-token latency, median, in ms
	ITLP99MS  float64 // inter-token latency, 99th percentile, in ms
}

// LoadOptions configure the load chart.
type LoadOptions struct {
	Title         string
	Width, Height vg.Length // 0 means the defaults
}

// Load draws a load run against the number of clients: the aggregate
// generation rate on top and the inter-token latency's median (solid) and
// 99th percentile (dashed) below, with markers at the measured levels.
func Load(points []LoadPoint, opt LoadOptions) (*Chart, error) {
	if len(points) == 0 {
		return nil, fmt.Errorf("plots: no load levels")
	}
	for _, p := range points {
		for _, v := range []float64{p.Clients, p.DecodeTPS, p.ITLP50MS, p.ITLP99MS} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("plots: load level of %v clients is not finite", p.Clients)
			}
		}
	}
	top, bottom := newPlot(opt.Title), newPlot("")
	var levels levelTicks
	for _, p := range points {
		levels = append(levels, p.Clients)
	}
	top.X.Tick.Marker, bottom.X.Tick.Marker = levels, levels
	top.Add(newGrid())
	bottom.Add(newGrid())
	top.Y.Label.Text = "aggregate tokens/s"
	if err := addLoadLine(top, points, func(p LoadPoint) float64 { return p.DecodeTPS }, "", prefillColor(), nil); err != nil {
		return nil, err
	}
	bottom.Y.Label.Text = "inter-token latency (ms)"
	bottom.X.Label.Text = "concurrent clients"
	if err := addLoadLine(bottom, points, func(p LoadPoint) float64 { return p.ITLP50MS }, "p50", genColor(), nil); err != nil {
		return nil, err
	}
	if err := addLoadLine(bottom, points, func(p LoadPoint) float64 { return p.ITLP99MS }, "p99", genColor(), []vg.Length{6, 4}); err != nil {
		return nil, err
	}
	w, h := opt.Width, opt.Height
	if w == 0 {
		w = DefaultWidth
	}
	if h == 0 {
		h = DefaultHeight
	}
	return &Chart{Width: w, Height: h, draw: func(c draw.Canvas) {
		c.SetColor(color.White)
		c.Fill(c.Rectangle.Path())
		// Aligned, the panels share the x axis's position and scale.
		tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: 8, PadBottom: 8, PadLeft: 8, PadRight: 16, PadY: 12}
		cs := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, c)
		top.Draw(cs[0][0])
		bottom.Draw(cs[1][0])
	}}, nil
}

// levelTicks marks the measured numbers of clients.
type levelTicks []float64

func (t levelTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for _, v := range t {
		if v >= min && v <= max {
			ts = append(ts, plot.Tick{Value: v, Label: TickLabel(v)})
		}
	}
	return ts
}

// addLoadLine adds y(p) against the clients to p as a line with point
// markers, in the legend when label is set, and starts the y axis at 0.
func addLoadLine(p *plot.Plot, pts []LoadPoint, y func(LoadPoint) float64, label string, c color.Color, dash []vg.Length) error {
	xys := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		xys[i] = plotter.XY{X: pt.Clients, Y: y(pt)}
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	l.Color, l.Width, l.Dashes = c, 2, dash
	s.Color, s.Shape, s.Radius = c, draw.CircleGlyph{}, 4
	p.Add(l, s)
	if label != "" {
		p.Legend.Add(label, l, s)
	}
	p.Y.Min = 0
	p.Y.Max = max(p.Y.Max, 1e-3)
	return nil
}
