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

// KLFloor is the smallest KL divergence the charts show; smaller values
// (a perfect match gives 0) are drawn at the floor on log scales.
const KLFloor = 1e-10

// KLSeries is the per-position KL divergence of one comparison.
type KLSeries struct {
	Label string
	KL    []float64 // in nats, one per position
}

// KLOptions configure the KL charts.
type KLOptions struct {
	Title         string
	Width, Height vg.Length // 0 means the defaults
	Bins          int       // histogram bins; 0 means 40
}

func (o KLOptions) size() (vg.Length, vg.Length) {
	w, h := o.Width, o.Height
	if w == 0 {
		w = DefaultWidth
	}
	if h == 0 {
		h = DefaultHeight
	}
	return w, h
}

func chartOf(p *plot.Plot, w, h vg.Length) *Chart {
	return &Chart{Width: w, Height: h, draw: func(c draw.Canvas) {
		c.SetColor(color.White)
		c.Fill(c.Rectangle.Path())
		p.Draw(draw.Crop(c, 8, -16, 8, -8))
	}}
}

// KLHistogram draws the distribution of KL divergences over all positions
// of all series: a histogram of log10 KL (values below KLFloor counted at
// the floor).
func KLHistogram(series []KLSeries, opt KLOptions) (*Chart, error) {
	var vs plotter.Values
	for _, s := range series {
		for _, v := range s.KL {
			if math.IsNaN(v) {
				return nil, fmt.Errorf("plots: series %q: NaN KL", s.Label)
			}
			vs = append(vs, math.Log10(max(v, KLFloor)))
		}
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("plots: no KL values")
	}
	bins := opt.Bins
	if bins <= 0 {
		bins = 40
	}
	p := newPlot(opt.Title)
	p.X.Label.Text = "log10 KL divergence (nats)"
	p.Y.Label.Text = "positions"
	h, err := plotter.NewHist(vs, bins)
	if err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	h.FillColor = prefillColor()
	h.LineStyle.Color = color.White
	h.LineStyle.Width = 0.5
	p.Add(newGrid(), h)
	p.Y.Min = 0
	w, ht := opt.size()
	return chartOf(p, w, ht), nil
}

// KLPositions draws KL divergence against position for each series, on a
// log scale.
func KLPositions(series []KLSeries, opt KLOptions) (*Chart, error) {
	if len(series) == 0 {
		return nil, fmt.Errorf("plots: no series")
	}
	p := newPlot(opt.Title)
	p.X.Label.Text = "position"
	p.Y.Label.Text = "KL divergence (nats)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = decadeTicks{}
	p.Add(newGrid())
	for i, s := range series {
		if len(s.KL) == 0 {
			return nil, fmt.Errorf("plots: series %q is empty", s.Label)
		}
		xys := make(plotter.XYs, len(s.KL))
		for j, v := range s.KL {
			xys[j] = plotter.XY{X: float64(j), Y: max(v, KLFloor)}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plots: %w", err)
		}
		l.Color = paletteColor(i)
		l.Width = 1.5
		p.Add(l)
		if s.Label != "" {
			p.Legend.Add(s.Label, l)
		}
	}
	w, h := opt.size()
	return chartOf(p, w, h), nil
}

// decadeTicks marks the powers of ten of a log axis, labelled 1e-5 and so
// on.
type decadeTicks struct{}

func (decadeTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for k := int(math.Floor(math.Log10(min))); k <= int(math.Ceil(math.Log10(max))); k++ {
		v := math.Pow10(k)
		if v >= min*(1-1e-9) && v <= max*(1+1e-9) {
			ts = append(ts, plot.Tick{Value: v, Label: fmt.Sprintf("1e%d", k)})
		}
	}
	return ts
}
