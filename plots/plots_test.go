package plots

import (
	"bytes"
	"flag"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"

	"github.com/ds4-go/ds4/harness"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares a chart's SVG with testdata/name byte for byte.
func golden(t *testing.T, ch *Chart, name string) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, ch.WriteSVG(&buf))
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), buf.String(), "%s differs from the golden file (go test ./plots -update rewrites it)", name)
	return buf.Bytes()
}

func csvSeries(t *testing.T, name string) SpeedSeries {
	rows, err := harness.ReadCSVFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	s := SpeedSeries{Label: strings.TrimSuffix(DefaultSpeedTitle(name), " t/s")}
	for _, r := range rows {
		s.Ctx = append(s.Ctx, float64(r.CtxTokens))
		s.Prefill = append(s.Prefill, r.PrefillTPS)
		s.Gen = append(s.Gen, r.GenTPS)
	}
	return s
}

func TestSpeedGolden(t *testing.T) {
	m2 := csvSeries(t, "m2_ultra.csv")
	ch, err := Speed([]SpeedSeries{m2}, SpeedOptions{Title: DefaultSpeedTitle("m2_ultra.csv")})
	require.NoError(t, err)
	svg := string(golden(t, ch, "m2_ultra_ts.svg"))
	// Structure: title, the three axis labels, upstream's colors, the
	// right axis ticks of generation t/s (0..25 in steps of 5).
	for _, s := range []string{"M2 Ultra t/s", "ctx size", "prefill t/s", "generation t/s", "#2563EB", "#DC2626", ">60k<", ">25<", ">500<"} {
		require.Contains(t, svg, s)
	}

	ch, err = Speed([]SpeedSeries{m2, csvSeries(t, "m4_max.csv")}, SpeedOptions{Title: "M2 Ultra vs M4 Max t/s"})
	require.NoError(t, err)
	svg = string(golden(t, ch, "compare_ts.svg"))
	require.Contains(t, svg, "M4 Max generation")

	var buf bytes.Buffer
	require.NoError(t, ch.WritePNG(&buf))
	img, err := png.Decode(&buf)
	require.NoError(t, err)
	require.Equal(t, 960, img.Bounds().Dx())
	require.Equal(t, 540, img.Bounds().Dy())

	_, err = Speed([]SpeedSeries{{Label: "x", Ctx: []float64{1}, Prefill: []float64{1}, Gen: []float64{1}}}, SpeedOptions{})
	require.ErrorContains(t, err, "at least two rows")
}

func TestKLGolden(t *testing.T) {
	// A deterministic, spread-out set of KL values.
	var a, b KLSeries
	a.Label, b.Label = "q2", "q4"
	for i := range 200 {
		x := float64(i)
		a.KL = append(a.KL, 1e-4*math.Exp(4*math.Sin(x*0.37)+x/60))
		b.KL = append(b.KL, 1e-5*math.Exp(3*math.Cos(x*0.23)+x/80))
	}
	a.KL[7] = 0 // a perfect match sits at the floor
	ch, err := KLHistogram([]KLSeries{a, b}, KLOptions{Title: "KL divergence"})
	require.NoError(t, err)
	golden(t, ch, "kl_hist.svg")
	ch, err = KLPositions([]KLSeries{a, b}, KLOptions{Title: "KL divergence per position"})
	require.NoError(t, err)
	svg := golden(t, ch, "kl_positions.svg")
	require.Contains(t, string(svg), "q4")

	_, err = KLHistogram(nil, KLOptions{})
	require.Error(t, err)
	_, err = KLPositions([]KLSeries{{Label: "e"}}, KLOptions{})
	require.Error(t, err)
}

func TestNice(t *testing.T) {
	require.Equal(t, 500.0, NiceCeil(1.05*412))
	require.Equal(t, 400.0, NiceCeil(1.05*380))
	require.Equal(t, 1.0, NiceCeil(0))
	require.Equal(t, 25.0, NiceCeil(24.4))
	require.Equal(t, 3000.0, NiceCeil(2600))
	require.Equal(t, 20000.0, NiceStep(65536, 6))
	require.Equal(t, 100.0, NiceStep(500, 6))
	require.Equal(t, 5.0, NiceStep(25, 6))
	require.Equal(t, "65.536k", TickLabel(65536))
	require.Equal(t, "2.5", TickLabel(2.5))
	require.Equal(t, "M3 Max t/s", DefaultSpeedTitle("speed-bench/m3_max.csv"))
	require.Equal(t, "My Run 2 t/s", DefaultSpeedTitle("my-run_2.csv"))
	require.Equal(t, []float64{0, 5, 10, 15, 20, 25}, tickValues(stepTicks{5}.Ticks(0, 25)))
}

func tickValues(ts []plot.Tick) []float64 {
	var v []float64
	for _, t := range ts {
		v = append(v, t.Value)
	}
	return v
}

func TestSteeringSweepGolden(t *testing.T) {
	pts := []SteeringPoint{
		{Scale: 1, Tokens: 140, KL: 0.12},
		{Scale: -2, Tokens: 40, KL: 0.9},
		{Scale: -1, Tokens: 67, KL: 0.3},
		{Scale: -0.5, Tokens: 101, KL: 0.07},
		{Scale: 0, Tokens: 136, KL: 0},
		{Scale: 0.5, Tokens: 138, KL: 0.03},
		{Scale: 2, Tokens: 171, KL: 0.55},
	}
	ch, err := SteeringSweep(pts, SteeringOptions{Title: "Directional steering sweep"})
	require.NoError(t, err)
	svg := golden(t, ch, "steering_sweep.svg")
	require.Contains(t, string(svg), "FFN steering scale")

	_, err = SteeringSweep(nil, SteeringOptions{})
	require.Error(t, err)
	_, err = SteeringSweep([]SteeringPoint{{KL: math.NaN()}}, SteeringOptions{})
	require.Error(t, err)
}
