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

// QualityPoint is one bar pair member of the quality-study chart: a group
// (e.g. a case and a recipe) measured in one series (e.g. with or without
// an imatrix).
type QualityPoint struct {
	Group  string
	Series string
	MeanKL float64 // mean KL divergence from the reference, nats
	Top1   float64 // same-top-1 rate, 0..1
}

// QualityOptions configure the quality-study chart.
type QualityOptions struct {
	Title         string
	Reference     string    // names the reference in the axis labels, e.g. "f32ref"
	Width, Height vg.Length // 0 means the defaults
}

// QualityStudy draws grouped bars: the mean KL divergence from the
// reference on top (log scale, bars rising from the decade below the
// smallest value, so a 2-bit and a 4-bit recipe read on one chart) and the
// same-top-1 rate (in %) below, one group per Group in order of first
// appearance and one colored bar per Series. Every group must have every
// series exactly once.
func QualityStudy(points []QualityPoint, opt QualityOptions) (*Chart, error) {
	if len(points) == 0 {
		return nil, fmt.Errorf("plots: no quality points")
	}
	var groups, series []string
	for _, p := range points {
		if !slices.Contains(groups, p.Group) {
			groups = append(groups, p.Group)
		}
		if !slices.Contains(series, p.Series) {
			series = append(series, p.Series)
		}
		if math.IsNaN(p.MeanKL) || math.IsInf(p.MeanKL, 0) || p.MeanKL < 0 || !(p.Top1 >= 0 && p.Top1 <= 1) {
			return nil, fmt.Errorf("plots: quality point %s/%s: KL %v, top-1 %v out of range", p.Group, p.Series, p.MeanKL, p.Top1)
		}
	}
	kl := make([]plotter.Values, len(series))
	top := make([]plotter.Values, len(series))
	for i := range series {
		kl[i] = make(plotter.Values, len(groups))
		top[i] = make(plotter.Values, len(groups))
	}
	seen := make(map[[2]int]bool, len(points))
	for _, p := range points {
		g, s := slices.Index(groups, p.Group), slices.Index(series, p.Series)
		if seen[[2]int{g, s}] {
			return nil, fmt.Errorf("plots: quality point %s/%s given twice", p.Group, p.Series)
		}
		seen[[2]int{g, s}] = true
		kl[s][g], top[s][g] = p.MeanKL, 100*p.Top1
	}
	if len(seen) != len(groups)*len(series) {
		return nil, fmt.Errorf("plots: quality chart needs every group in every series (%d of %d bars given)", len(seen), len(groups)*len(series))
	}
	// Log bars: heights are decades above the floor, the decade below the
	// smallest KL (values under KLFloor sit at KLFloor).
	lo := math.Inf(1)
	for _, v := range kl {
		for _, x := range v {
			lo = min(lo, max(x, KLFloor))
		}
	}
	floor := math.Floor(math.Log10(lo))
	for _, v := range kl {
		for i, x := range v {
			v[i] = math.Log10(max(x, KLFloor)) - floor
		}
	}
	ref := opt.Reference
	if ref != "" {
		ref = " vs " + ref
	}
	w, h := opt.Width, opt.Height
	if w == 0 {
		w = DefaultWidth
	}
	if h == 0 {
		h = DefaultHeight
	}
	// Bars share the group's slot: width per bar from the chart width.
	barW := min(vg.Length(40), (w-120)/vg.Length(len(groups)*(len(series)+1)))
	upper, err := barPanel(opt.Title, "mean KL"+ref+" (nats)", groups, series, kl, barW, true)
	if err != nil {
		return nil, err
	}
	upper.Y.Tick.Marker = shiftedDecades{floor}
	upper.Y.Max = math.Ceil(upper.Y.Max)
	lower, err := barPanel("", "same top-1"+ref+" (%)", groups, series, top, barW, false)
	if err != nil {
		return nil, err
	}
	lower.Y.Max = 100
	return &Chart{Width: w, Height: h, draw: func(c draw.Canvas) {
		c.SetColor(color.White)
		c.Fill(c.Rectangle.Path())
		half := c.Size().Y / 2
		upper.Draw(draw.Crop(c, 8, -16, half+4, -8))
		lower.Draw(draw.Crop(c, 8, -16, 8, -half-12))
	}}, nil
}

// barPanel returns one panel of grouped bars, values[s][g] for series s
// of group g, with a legend when legend is set.
func barPanel(title, ylabel string, groups, series []string, values []plotter.Values, barW vg.Length, legend bool) (*plot.Plot, error) {
	p := newPlot(title)
	p.Y.Label.Text = ylabel
	p.Add(newGrid())
	for s := range series {
		b, err := plotter.NewBarChart(values[s], barW)
		if err != nil {
			return nil, fmt.Errorf("plots: %w", err)
		}
		b.Color = paletteColor(s)
		b.LineStyle.Width = 0
		b.Offset = barW * (vg.Length(s) - vg.Length(len(series)-1)/2)
		p.Add(b)
		if legend {
			p.Legend.Add(series[s], b)
		}
	}
	p.NominalX(groups...)
	p.Y.Min = 0
	return p, nil
}

// shiftedDecades labels an axis whose values are decades above 10^floor:
// value k is labelled 1e(floor+k).
type shiftedDecades struct{ floor float64 }

func (d shiftedDecades) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for k := math.Ceil(min); k <= max+1e-9; k++ {
		ts = append(ts, plot.Tick{Value: k, Label: fmt.Sprintf("1e%d", int(d.floor+k))})
	}
	return ts
}
