package plots

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Default chart size, in points (one SVG point is one PNG pixel).
const (
	DefaultWidth  = 960
	DefaultHeight = 540
)

// Upstream's series colors: prefill #2563eb, generation #dc2626.
func prefillColor() color.RGBA { return color.RGBA{0x25, 0x63, 0xeb, 0xff} }
func genColor() color.RGBA     { return color.RGBA{0xdc, 0x26, 0x26, 0xff} }

// paletteColor colors run i of a comparison chart.
func paletteColor(i int) color.RGBA {
	p := [...]color.RGBA{
		prefillColor(), genColor(),
		{0x16, 0xa3, 0x4a, 0xff}, {0x93, 0x33, 0xea, 0xff}, {0xea, 0x58, 0x0c, 0xff},
		{0x08, 0x91, 0xb2, 0xff}, {0x4b, 0x55, 0x63, 0xff}, {0xdb, 0x27, 0x77, 0xff},
	}
	return p[i%len(p)]
}

// Chart is a drawn-on-demand figure.
type Chart struct {
	Width, Height vg.Length
	draw          func(c draw.Canvas)
}

// WriteSVG writes the chart as SVG.
func (ch *Chart) WriteSVG(w io.Writer) error {
	c := vgsvg.New(ch.Width, ch.Height)
	ch.draw(draw.New(c))
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("plots: write SVG: %w", err)
	}
	return nil
}

// WritePNG writes the chart as PNG, one pixel per point.
func (ch *Chart) WritePNG(w io.Writer) error {
	c := vgimg.NewWith(vgimg.UseWH(ch.Width, ch.Height), vgimg.UseDPI(72))
	ch.draw(draw.New(c))
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		return fmt.Errorf("plots: write PNG: %w", err)
	}
	return nil
}

// Save writes the chart to path as PNG when it ends in ".png", else as
// SVG.
func (ch *Chart) Save(path string) error {
	var buf bytes.Buffer
	var err error
	if strings.EqualFold(filepath.Ext(path), ".png") {
		err = ch.WritePNG(&buf)
	} else {
		err = ch.WriteSVG(&buf)
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return nil
}

// fonts returns the fixed text styles: Liberation Sans at fixed sizes.
func sans(size vg.Length, bold bool) font.Font {
	f := font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
	if bold {
		f.Weight = xfont.WeightBold
	}
	return f
}

// newPlot returns a plot with the fixed styles.
func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sans(20, true)
	p.Title.Padding = 12
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(14, false)
		a.Tick.Label.Font = sans(12, false)
		a.Padding = 0
	}
	p.Legend.TextStyle.Font = sans(13, false)
	p.Legend.Top = true
	p.Legend.Padding = 4
	p.Legend.ThumbnailWidth = 24
	p.Legend.XOffs = -12
	p.Legend.YOffs = -8
	return p
}

// NiceCeil returns the smallest of {1, 2, 2.5, 3, 4, 5, 10}·10^k that is
// >= v (1 when v <= 0), as upstream's plot_speed does.
func NiceCeil(v float64) float64 {
	if !(v > 0) {
		return 1
	}
	m := math.Pow(10, math.Floor(math.Log10(v)))
	for _, f := range []float64{1, 2, 2.5, 3, 4, 5, 10} {
		if f*m >= v {
			return f * m
		}
	}
	return 10 * m
}

// NiceStep returns the smallest of {1, 2, 2.5, 5, 10}·10^k that is >=
// span/n.
func NiceStep(span float64, n int) float64 {
	raw := span / float64(n)
	if !(raw > 0) {
		return 1
	}
	m := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, f := range []float64{1, 2, 2.5, 5, 10} {
		if f*m >= raw {
			return f * m
		}
	}
	return 10 * m
}

// TickLabel formats a tick value as upstream does: %g, values of
// magnitude >= 1000 as thousands with a k suffix.
func TickLabel(v float64) string {
	if math.Abs(v) >= 1000 {
		return strconv.FormatFloat(v/1000, 'g', 6, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// stepTicks marks 0, step, 2·step, … up to max (with a 0.1% epsilon so the
// top tick is kept).
type stepTicks struct{ step float64 }

func (t stepTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for i := 0; ; i++ {
		v := float64(i) * t.step
		if v > max+t.step*1e-3 {
			return ts
		}
		if v >= min {
			ts = append(ts, plot.Tick{Value: v, Label: TickLabel(v)})
		}
	}
}

// SpeedSeries is one ds4-bench run: rates at each context frontier.
type SpeedSeries struct {
	Label   string
	Ctx     []float64
	Prefill []float64
	Gen     []float64
}

// SpeedOptions configure Speed.
type SpeedOptions struct {
	Title         string
	Width, Height vg.Length // 0 means the defaults
}

// Speed draws upstream's speed chart for one run, or a comparison of
// several: context size on x from 0, prefill tokens/s against the left
// axis (solid lines), generation tokens/s against the right axis (dashed
// lines when comparing), both from 0 to a nice ceiling of 1.05 × their
// maximum, with horizontal grid lines following the left axis.
func Speed(series []SpeedSeries, opt SpeedOptions) (*Chart, error) {
	if len(series) == 0 {
		return nil, fmt.Errorf("plots: no series")
	}
	var xMax, preMax, genMax float64
	for _, s := range series {
		if len(s.Ctx) < 2 || len(s.Prefill) != len(s.Ctx) || len(s.Gen) != len(s.Ctx) {
			return nil, fmt.Errorf("plots: series %q: need at least two rows of ctx, prefill and gen", s.Label)
		}
		for i := range s.Ctx {
			xMax, preMax, genMax = max(xMax, s.Ctx[i]), max(preMax, s.Prefill[i]), max(genMax, s.Gen[i])
		}
	}
	w, h := opt.Width, opt.Height
	if w == 0 {
		w = DefaultWidth
	}
	if h == 0 {
		h = DefaultHeight
	}
	left, right := NiceCeil(1.05*preMax), NiceCeil(1.05*genMax)
	p := newPlot(opt.Title)
	p.X.Label.Text = "ctx size"
	p.Y.Label.Text = "prefill t/s"
	p.X.Min, p.X.Max = 0, xMax
	p.Y.Min, p.Y.Max = 0, left
	p.X.Tick.Marker = stepTicks{NiceStep(xMax, 6)}
	p.Y.Tick.Marker = stepTicks{NiceStep(left, 6)}
	p.Add(newGrid())
	for i, s := range series {
		pre, gen := prefillColor(), genColor()
		var dash []vg.Length
		preName, genName := "prefill", "generation"
		if len(series) > 1 {
			pre = paletteColor(i)
			gen, dash = pre, []vg.Length{8, 5}
			preName, genName = s.Label+" prefill", s.Label+" generation"
		}
		pl, err := line(s.Ctx, s.Prefill, 1, pre, nil)
		if err != nil {
			return nil, err
		}
		gl, err := line(s.Ctx, s.Gen, left/right, gen, dash)
		if err != nil {
			return nil, err
		}
		p.Add(pl, gl)
		p.Legend.Add(preName, pl)
		p.Legend.Add(genName, gl)
	}
	rightTicks := stepTicks{NiceStep(right, 6)}.Ticks(0, right)
	axisLabel := text.Style{Color: color.Black, Font: sans(14, false), Rotation: -math.Pi / 2, XAlign: draw.XCenter, YAlign: draw.YTop, Handler: p.TextHandler}
	tickLabel := text.Style{Color: color.Black, Font: sans(12, false), XAlign: draw.XLeft, YAlign: draw.YCenter, Handler: p.TextHandler}
	var labelW vg.Length
	for _, t := range rightTicks {
		labelW = max(labelW, tickLabel.Width(t.Label))
	}
	margin := vg.Length(8)
	rightW := p.Y.Tick.Length + 4 + labelW + 6 + axisLabel.Height("generation t/s") + margin
	ch := &Chart{Width: w, Height: h}
	ch.draw = func(c draw.Canvas) {
		c.SetColor(color.White)
		c.Fill(c.Rectangle.Path())
		inner := draw.Crop(c, margin, -rightW, margin, -margin)
		p.Draw(inner)
		dc := p.DataCanvas(inner)
		x := dc.Max.X
		c.StrokeLine2(p.Y.LineStyle, x, dc.Min.Y, x, dc.Max.Y)
		for _, t := range rightTicks {
			y := dc.Min.Y + vg.Length(t.Value/right)*(dc.Max.Y-dc.Min.Y)
			c.StrokeLine2(p.Y.Tick.LineStyle, x, y, x+p.Y.Tick.Length, y)
			c.FillText(tickLabel, vg.Point{X: x + p.Y.Tick.Length + 4, Y: y}, t.Label)
		}
		c.FillText(axisLabel, vg.Point{X: c.Max.X - margin, Y: (dc.Min.Y + dc.Max.Y) / 2}, "generation t/s")
	}
	return ch, nil
}

// newGrid returns light grid lines.
func newGrid() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = color.Gray{0xdd}, color.Gray{0xdd}
	g.Vertical.Width, g.Horizontal.Width = 0.5, 0.5
	return g
}

// line returns a line of (x, y·scale) in the given color and dashes.
func line(x, y []float64, scale float64, c color.Color, dash []vg.Length) (*plotter.Line, error) {
	xys := make(plotter.XYs, len(x))
	for i := range x {
		xys[i] = plotter.XY{X: x[i], Y: y[i] * scale}
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	l.Color = c
	l.Width = 3
	l.Dashes = dash
	l.LineStyle.Color = c
	return l, nil
}

// DefaultSpeedTitle returns upstream's default title for a CSV path: the
// file stem split on '_' and '-', words m<digits> upper-cased, the others
// capitalized, then " t/s" ("m3_max.csv" gives "M3 Max t/s").
func DefaultSpeedTitle(path string) string {
	stem := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	words := strings.FieldsFunc(stem, func(r rune) bool { return r == '_' || r == '-' })
	for i, w := range words {
		if len(w) > 1 && w[0] == 'm' && strings.Trim(w[1:], "0123456789") == "" {
			words[i] = strings.ToUpper(w)
		} else if w != "" {
			words[i] = strings.ToUpper(w[:1]) + strings.ToLower(w[1:])
		}
	}
	return strings.Join(words, " ") + " t/s"
}
