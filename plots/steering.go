package plots

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// SteeringPoint is the mean effect of one steering scale over a sweep's
// prompts.
type SteeringPoint struct {
	Scale  float64 // FFN steering scale
	Tokens float64 // mean output length in tokens
	KL     float64 // mean KL divergence (nats) of the first next-token distribution from the unsteered run
}

// SteeringOptions configure the steering sweep chart.
type SteeringOptions struct {
	Title         string
	Width, Height vg.Length // 0 means the defaults
}

// SteeringSweep draws the effect of a steering sweep against the scale:
// the mean output length on top and the mean first-token KL divergence
// below, with markers at the measured scales.
func SteeringSweep(points []SteeringPoint, opt SteeringOptions) (*Chart, error) {
	if len(points) == 0 {
		return nil, fmt.Errorf("plots: no steering points")
	}
	pts := slices.Clone(points)
	slices.SortFunc(pts, func(a, b SteeringPoint) int {
		switch {
		case a.Scale < b.Scale:
			return -1
		case a.Scale > b.Scale:
			return 1
		}
		return 0
	})
	for _, p := range pts {
		for _, v := range []float64{p.Scale, p.Tokens, p.KL} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("plots: steering point at scale %v is not finite", p.Scale)
			}
		}
	}
	top, err := sweepPanel(opt.Title, "mean output tokens", pts, func(p SteeringPoint) float64 { return p.Tokens }, prefillColor())
	if err != nil {
		return nil, err
	}
	bottom, err := sweepPanel("", "mean first-token KL (nats)", pts, func(p SteeringPoint) float64 { return p.KL }, genColor())
	if err != nil {
		return nil, err
	}
	bottom.X.Label.Text = "FFN steering scale"
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
		half := c.Size().Y / 2
		top.Draw(draw.Crop(c, 8, -16, half+4, -8))
		bottom.Draw(draw.Crop(c, 8, -16, 8, -half-12))
	}}, nil
}

// sweepPanel returns one panel of the sweep chart: y(p) against the scale
// as a line with point markers.
func sweepPanel(title, ylabel string, pts []SteeringPoint, y func(SteeringPoint) float64, c color.Color) (*plot.Plot, error) {
	p := newPlot(title)
	p.Y.Label.Text = ylabel
	xys := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		xys[i] = plotter.XY{X: pt.Scale, Y: y(pt)}
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	l.Color, l.Width = c, 2
	s.Color, s.Shape, s.Radius = c, draw.CircleGlyph{}, 4
	p.Add(newGrid(), l, s)
	p.Y.Min = min(0, p.Y.Min)
	return p, nil
}
