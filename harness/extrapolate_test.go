package harness

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/synth"
	"github.com/ds4-go/ds4/engine"
	"github.com/ds4-go/ds4/engine/layout"
	"github.com/ds4-go/ds4/gguf"
)

// tinyTraffic returns the decode traffic of a tiny model of n layers with
// a small vocabulary, written by synth and parsed back.
func tinyTraffic(t *testing.T, n int) []Traffic { return tinyTrafficVocab(t, n, 512) }

// tinyTrafficVocab is tinyTraffic with the vocabulary vocab.
func tinyTrafficVocab(t *testing.T, n, vocab int) []Traffic {
	t.Helper()
	p := layout.Tiny()
	p.Vocab = vocab
	p.SetLayers(n)
	var buf bytes.Buffer
	_, err := synth.Write(&buf, synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: 3})
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	parts, err := DecodeTraffic(f, p)
	require.NoError(t, err)
	return parts
}

// TestProjectTraffic projects a 5-layer tiny model's traffic to 8 layers
// and checks it against the traffic of a real 8-layer one: the 5-layer
// model has a learned-routing layer of each compression ratio (3 and 4),
// so the projection is exact.
func TestProjectTraffic(t *testing.T) {
	five, eight := tinyTraffic(t, 5), tinyTraffic(t, 8)
	p := layout.Tiny()
	p.SetLayers(8)
	got, err := ProjectTraffic(five, p.CompressRatios)
	require.NoError(t, err)
	require.Equal(t, eight, got)

	two := tinyTraffic(t, 2)
	_, err = ProjectTraffic(two, p.CompressRatios)
	require.ErrorContains(t, err, "no layer of compression ratio 4")
	_, err = ProjectTraffic(five, p.CompressRatios[:4])
	require.ErrorContains(t, err, "fewer than the slice's 5")
	bad := append([]int(nil), p.CompressRatios...)
	bad[3] = 16
	_, err = ProjectTraffic(five, bad)
	require.ErrorContains(t, err, "layer 3 has compression ratio 128 where the projected model's has 16")
	_, err = ProjectTraffic(five[:len(five)-1], p.CompressRatios)
	require.ErrorContains(t, err, "embedding, layers, head and total")
}

// TestExtrapolate checks the projection's arithmetic on round numbers:
// slices of 2 and 4 layers at 100 and 200 ms a decode step put a layer at
// 50 ms, so 8 layers take 400 ms.
func TestExtrapolate(t *testing.T) {
	two, four, eight := tinyTraffic(t, 2), tinyTraffic(t, 4), tinyTraffic(t, 8)
	p := layout.Tiny()
	p.SetLayers(8)
	mc := Machine{ReadGBsAll: 20, Int8GopsAll: 300, FMAGflopsAll: 150, Q8_0GopsAll: 250}
	small := SliceSpeed{Parts: two, Speed: Speed{PrefillTokens: 64, PrefillTPS: 1000, DecodeTokens: 16, DecodeTPS: 10}}
	large := SliceSpeed{Parts: four, Speed: Speed{PrefillTokens: 64, PrefillTPS: 500, DecodeTokens: 16, DecodeTPS: 5}}
	e, err := Extrapolate(small, large, p.CompressRatios, mc)
	require.NoError(t, err)
	near := func(want, got float64, what string) {
		t.Helper()
		require.InDelta(t, want, got, 1e-9*math.Abs(want), what)
	}
	near(50, e.DecodeMsPerLayer, "decode ms a layer")
	near(0.5, e.PrefillMsPerLayer, "prefill ms a layer")
	near(2.5, e.DecodeTPS, "decode tok/s: 1/(200 ms + 4 × 50 ms)")
	near(250, e.PrefillTPS, "prefill tok/s: 1/(2 ms + 4 × 0.5 ms)")
	// Layers 4..7 of the released schedule repeat layers 2 and 3, which
	// the 4-layer slice has, hash routing aside: its layer 2 is one of
	// the three hash-routed layers, and the projection's layers 4 and 6
	// with it read a row of the token-to-expert table, 4 bytes an active
	// expert, where the real model's read the expert biases, 4 bytes an
	// expert.
	tot := eight[len(eight)-1]
	tp := layout.Tiny()
	require.Equal(t, tot.Bytes+2*4*int64(tp.ExpertsUsed-tp.Experts), e.Bytes)
	require.Equal(t, int64(8), e.ProjectedLayers)
	require.Equal(t, two[len(two)-1].Bytes, e.SmallBytes)
	require.Equal(t, four[len(four)-1].Bytes, e.LargeBytes)
	near(mc.ReadGBsAll*1e9/float64(e.Bytes), e.DecodeLimitTPS, "speed of light")
	near(e.DecodeTPS/e.DecodeLimitTPS, e.DecodeFraction, "decode fraction")
	work := PrefillWork(eight, 64)
	require.Equal(t, work.MACsInt8, e.PrefillMACsInt8, "the table's MACs are the same in hash and learned layers")
	require.Equal(t, work.MACsQ8_0, e.PrefillMACsQ8_0)
	near(PrefillLimit(mc, work), e.PrefillLimitTPS, "compute limit")
	near(PrefillLimitMix(mc, work), e.PrefillLimitMixTPS, "mix limit")
	near(e.PrefillTPS/e.PrefillLimitTPS, e.PrefillFraction, "prefill fraction")
	near(e.PrefillTPS/e.PrefillLimitMixTPS, e.PrefillFractionMix, "prefill mix fraction")
	require.Zero(t, e.PrefillLimitVNNITPS, "no VNNI probed")
	require.Zero(t, e.PrefillFractionVNNI)

	for _, tc := range []struct {
		name         string
		small, large SliceSpeed
		ratios       []int
		want         string
	}{
		{"not slower", small, SliceSpeed{Parts: four, Speed: Speed{PrefillTokens: 64, PrefillTPS: 500, DecodeTPS: 11}}, p.CompressRatios, "ran no slower"},
		{"swapped", large, small, p.CompressRatios, "not more than the smaller one's 4"},
		{"too few layers", small, large, p.CompressRatios[:3], "fewer than the larger slice's 4"},
		{"prompt lengths", small, SliceSpeed{Parts: four, Speed: Speed{PrefillTokens: 32, PrefillTPS: 500, DecodeTPS: 5}}, p.CompressRatios, "prefilled 64 and 32 tokens"},
		{"unmeasured", SliceSpeed{Parts: two}, large, p.CompressRatios, "must be measured"},
		{"other model", SliceSpeed{Parts: tinyTrafficVocab(t, 2, 1024), Speed: small.Speed}, large, p.CompressRatios, "not slices of one model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Extrapolate(tc.small, tc.large, tc.ratios, mc)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestMedianSpeed(t *testing.T) {
	runs := []Speed{
		{PrefillTokens: 8, DecodeTokens: 4, PrefillTPS: 30, PrefillFirstTPS: 3, DecodeTPS: 7},
		{PrefillTokens: 8, DecodeTokens: 4, PrefillTPS: 10, PrefillFirstTPS: 1, DecodeTPS: 9},
		{PrefillTokens: 8, DecodeTokens: 4, PrefillTPS: 20, PrefillFirstTPS: 2, DecodeTPS: 8},
	}
	require.Equal(t, Speed{PrefillTokens: 8, DecodeTokens: 4, PrefillTPS: 20, PrefillFirstTPS: 2, DecodeTPS: 8}, MedianSpeed(runs))
	require.Equal(t, Speed{PrefillTokens: 8, DecodeTokens: 4, PrefillTPS: 20, PrefillFirstTPS: 2, DecodeTPS: 8}, MedianSpeed(runs[:2]), "the mean of the middle two")
	require.Equal(t, Speed{}, MedianSpeed(nil))
}

// tinySliceModel writes a tiny model of n layers with a small vocabulary
// and opens it.
func tinySliceModel(t *testing.T, n int) *engine.Model {
	t.Helper()
	p := layout.Tiny()
	p.Vocab = 512
	p.SetLayers(n)
	path := filepath.Join(t.TempDir(), fmt.Sprintf("tiny%d.gguf", n))
	_, err := synth.WriteFile(path, synth.Options{Params: p, Recipe: layout.RecipeQ2, Seed: 1})
	require.NoError(t, err)
	m, err := engine.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { m.File.Close() })
	return m
}

// noiseSwamped is the part of Extrapolate's error that says the larger
// slice measured no slower than the smaller one, which a loaded machine
// can make happen on tiny slices.
const noiseSwamped = "the noise of the measurement swamps its layers' cost"

// TestRunExtrapolation projects tiny slices of 2 and 6 layers to 10,
// and checks that slices the projection cannot use are refused before
// anything is measured. A tiny slice's step takes a fraction of a
// millisecond, so on a loaded machine the larger slice can measure no
// slower than the smaller one and the projection is refused, as it should
// be: on that refusal alone it is measured again, at most three times,
// and then skipped rather than failed.
func TestRunExtrapolation(t *testing.T) {
	two, six := tinySliceModel(t, 2), tinySliceModel(t, 6)
	be := cpu.New(2)
	t.Cleanup(be.Close)
	for _, tc := range []struct {
		name         string
		small, large *engine.Model
		layers       int
		err          string // refused before measuring
	}{
		{"project", two, six, 10, ""},
		{"too few layers", two, six, 4, "fewer than the slice's 6"},
		{"no layer of each ratio", six, two, 10, "no layer of compression ratio 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := ExtrapolateOptions{Layers: tc.layers, Pairs: 3, Prefill: 16, Decode: 32, Names: [2]string{"small", "large"},
				Probe: MachineConfig{BufferBytes: 8 << 20, Threads: 2, MinTime: 10 * time.Millisecond, Trials: 1}}
			var probed bool
			var ticks, total int
			opt.Step = func(string) { probed = true }
			opt.Bar = func(_ string, n int) (func(int), func()) { total = n; return func(n int) { ticks += n }, func() {} }
			var r *ExtrapolateRun
			var err error
			for attempt := 1; attempt <= 3; attempt++ {
				ticks = 0
				if r, err = RunExtrapolation(context.Background(), tc.small, tc.large, be, opt); err == nil || !strings.Contains(err.Error(), noiseSwamped) {
					break
				}
				t.Logf("attempt %d: %v", attempt, err)
			}
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.False(t, probed, "refused after probing")
				return
			}
			if err != nil && strings.Contains(err.Error(), noiseSwamped) {
				t.Skipf("the machine's noise swamped the tiny slices' layers three times: %v", err)
			}
			require.NoError(t, err)
			require.Equal(t, total, ticks)
			require.Equal(t, 2*3*(2*16+32+speedWarmup), total)
			require.Len(t, r.Runs[0], 3)
			require.Len(t, r.Runs[1], 3)
			require.Positive(t, r.Machine.ReadGBsAll)
			e := r.Extrapolation
			require.Equal(t, int64(2), e.SmallLayers)
			require.Equal(t, int64(6), e.LargeLayers)
			require.Equal(t, int64(10), e.ProjectedLayers)
			require.Equal(t, MedianSpeed(r.Runs[1]).DecodeTPS, e.LargeDecodeTPS)

			path, err := WriteExtrapolateRun(t.TempDir(), RunMeta{RunID: "x", ModelName: "tiny", StartedAt: time.Now()}, r)
			require.NoError(t, err)
			recs, err := ReadRows[ExtrapolateRecord](path)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.Equal(t, e, recs[0].Extrapolation)
		})
	}
}

func TestSpeedRange(t *testing.T) {
	decode := func(s Speed) float64 { return s.DecodeTPS }
	for _, tc := range []struct {
		name   string
		runs   []Speed
		lo, hi float64
	}{
		{"none", nil, 0, 0},
		{"one", []Speed{{DecodeTPS: 3}}, 3, 3},
		{"several", []Speed{{DecodeTPS: 3}, {DecodeTPS: 1}, {DecodeTPS: 5}, {DecodeTPS: 2}}, 1, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := SpeedRange(tc.runs, decode)
			require.Equal(t, tc.lo, lo)
			require.Equal(t, tc.hi, hi)
		})
	}
}

// TestPairIntervals projects two pairs of runs by hand: slices of 2 and 4
// layers projected to 8 at 10 and 5 tok/s project to 1/(1/5 + 4·0.05) =
// 2.5 tok/s, at 10 and 4 to 1/(1/4 + 4·0.075) = 1/0.55, so a limit of 10
// gives fractions 1/4 and 2/11: mean 19/88, and with two pairs the
// interval's half width is tan(0.475π) (Student's t of one degree of
// freedom) times half their difference, 3/88. Prefill at 1000 and 500 or
// 400 tok/s gives the same fractions of 1000 and twice them of 500.
func TestPairIntervals(t *testing.T) {
	t1 := math.Tan(0.475 * math.Pi)
	e := Extrapolation{SmallLayers: 2, LargeLayers: 4, ProjectedLayers: 8, DecodeLimitTPS: 10, PrefillLimitTPS: 1000, PrefillLimitMixTPS: 500}
	small := []Speed{{DecodeTPS: 10, PrefillTPS: 1000}, {DecodeTPS: 10, PrefillTPS: 1000}}
	large := []Speed{{DecodeTPS: 5, PrefillTPS: 500}, {DecodeTPS: 4, PrefillTPS: 400}}
	e.PairIntervals(small, large)
	want := []float64{19.0/88 - t1*3/88, 19.0/88 + t1*3/88, 19.0/88 - t1*3/88, 19.0/88 + t1*3/88, 19.0/44 - t1*3/44, 19.0/44 + t1*3/44, 0, 0}
	got := []float64{e.DecodeFractionCILo, e.DecodeFractionCIHi, e.PrefillFractionCILo, e.PrefillFractionCIHi,
		e.PrefillFractionMixCILo, e.PrefillFractionMixCIHi, e.PrefillFractionVNNICILo, e.PrefillFractionVNNICIHi}
	require.InDeltaSlice(t, want, got, 1e-12)

	one := Extrapolation{SmallLayers: 2, LargeLayers: 4, ProjectedLayers: 8, DecodeLimitTPS: 10}
	one.PairIntervals(small[:1], large[:1])
	require.Zero(t, one.DecodeFractionCILo+one.DecodeFractionCIHi, "one pair bounds nothing")
}
