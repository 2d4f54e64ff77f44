package harness

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
)

func TestRoundFractions(t *testing.T) {
	t2 := 0.95 * math.Sqrt(2/0.0975) // Student's t, two degrees of freedom, 0.975 quantile
	const bytes = 1e9                // a round at 10 GB/s decoding 5 tok/s reads 5 of 10 GB/s: 0.5
	round := func(gbs, tps float64) DecodeRound { return DecodeRound{ReadGBs: gbs, DecodeTPS: tps} }
	tests := []struct {
		name        string
		rounds      []DecodeRound
		med, lo, hi float64
		ciLo, ciHi  float64
	}{
		{"none", nil, 0, 0, 0, 0, 0},
		{"one", []DecodeRound{round(10, 5)}, 0.5, 0.5, 0.5, 0, 0},
		// 0.9, 0.25 and 0.4: mean 0.516667, squared deviations 0.231667.
		{"odd: the middle one", []DecodeRound{round(10, 9), round(20, 5), round(10, 4)}, 0.4, 0.25, 0.9,
			1.55/3 - t2*math.Sqrt(0.231666666666666667/2/3), 1.55/3 + t2*math.Sqrt(0.231666666666666667/2/3)},
		// 0.2, 0.8, 0.4, 0.6: mean 0.5, squared deviations 0.2, Student's
		// t of three degrees of freedom 3.182446305 (tables).
		{"even: the mean of the middle two", []DecodeRound{round(10, 2), round(10, 8), round(10, 4), round(10, 6)}, 0.5, 0.2, 0.8,
			0.5 - 3.182446305284263*math.Sqrt(0.2/3/4), 0.5 + 3.182446305284263*math.Sqrt(0.2/3/4)},
		{"no bandwidth counts as 0", []DecodeRound{round(0, 5)}, 0, 0, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			med, lo, hi := RoundFractions(tc.rounds, bytes)
			require.InDelta(t, tc.med, med, 1e-12)
			require.InDelta(t, tc.lo, lo, 1e-12)
			require.InDelta(t, tc.hi, hi, 1e-12)
			ciLo, ciHi := RoundFractionsCI(tc.rounds, bytes)
			require.InDelta(t, tc.ciLo, ciLo, 1e-9)
			require.InDelta(t, tc.ciHi, ciHi, 1e-9)
		})
	}
}

// roundsSetup returns the tiny model, a two-worker CPU backend closed at
// the test's end and small probe settings for the rounds' tests.
func roundsSetup(t *testing.T) (*engine.Model, *cpu.Backend, MachineConfig) {
	t.Helper()
	m, err := engine.OpenTiny()
	require.NoError(t, err)
	be := cpu.New(2)
	t.Cleanup(be.Close)
	return m, be, MachineConfig{BufferBytes: 8 << 20, Threads: 2, MinTime: 10 * time.Millisecond}
}

// TestMeasureDecodeRounds runs three rounds on the tiny model and joins
// them into roofline rows that round-trip through Parquet.
func TestMeasureDecodeRounds(t *testing.T) {
	m, be, cfg := roundsSetup(t)
	var ticks int
	rounds, err := MeasureDecodeRounds(context.Background(), m, be, cfg, 8, 2, 3, func(n int) { ticks += n })
	require.NoError(t, err)
	require.Len(t, rounds, 3)
	require.Equal(t, 3*(speedWarmup+2), ticks)
	for _, r := range rounds {
		require.Positive(t, r.ReadGBs)
		require.Positive(t, r.DecodeTPS)
	}
	_, err = MeasureDecodeRounds(context.Background(), m, be, cfg, 8, 2, 0, nil)
	require.Error(t, err, "no rounds")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = MeasureDecodeRounds(ctx, m, be, cfg, 8, 2, 1, nil)
	require.ErrorIs(t, err, context.Canceled)

	parts, err := DecodeTraffic(m.File, m.Params)
	require.NoError(t, err)
	total := parts[len(parts)-1]
	meta := RunMeta{RunID: "rounds"}
	mc := Machine{ReadGBs1: 30, ReadGBsAll: 60, FMAGflopsAll: 100, Int8GopsAll: 200}
	path, err := WriteRun(t.TempDir(), RooflineTable, meta, RooflineRecords(meta, mc, parts, nil, Speed{DecodeTokens: 2}, rounds, nil))
	require.NoError(t, err)
	rows, err := ReadRows[RooflineRecord](path)
	require.NoError(t, err)
	last := rows[len(rows)-1]
	med, lo, hi := RoundFractions(rounds, total.Bytes)
	require.Equal(t, int64(3), last.DecodeRounds)
	require.Equal(t, [3]float64{med, lo, hi}, [3]float64{last.DecodeRoundFraction, last.DecodeRoundFractionMin, last.DecodeRoundFractionMax})
	ciLo, ciHi := RoundFractionsCI(rounds, total.Bytes)
	require.Equal(t, [2]float64{ciLo, ciHi}, [2]float64{last.DecodeRoundFractionCILo, last.DecodeRoundFractionCIHi})
	gbs := []float64{rounds[0].ReadGBs, rounds[1].ReadGBs, rounds[2].ReadGBs}
	require.Equal(t, min(gbs[0], gbs[1], gbs[2]), last.DecodeRoundReadGBsMin)
	require.Equal(t, max(gbs[0], gbs[1], gbs[2]), last.DecodeRoundReadGBsMax)
}

func TestSummarizePrefillRounds(t *testing.T) {
	t2 := 0.95 * math.Sqrt(2/0.0975) // Student's t, two degrees of freedom, 0.975 quantile
	// 100 G int8 multiply-adds a token (60 G of them Q8_0) and 25 G float:
	// at 400 Gop/s int8, 300 Q8_0 and 100 GFLOP/s FMA a token takes 1 s
	// (0.5 + 0.5) at the compute limit and 1.1 s (0.4 + 0.2 + 0.5) at the
	// mix limit.
	work := Traffic{MACsInt8: 100e9, MACsQ8_0: 60e9, MACsFloat: 25e9}
	mc := Machine{Int8GopsAll: 1000, Q8_0GopsAll: 1000, FMAGflopsAll: 100} // the rounds' own peaks replace the int8 ones
	round := func(int8, q8, tps float64) PrefillRound {
		return PrefillRound{Int8GopsAll: int8, Q8_0GopsAll: q8, PrefillTPS: tps}
	}
	tests := []struct {
		name   string
		rounds []PrefillRound
		want   PrefillRoundStats
	}{
		{"none", nil, PrefillRoundStats{}},
		{"one", []PrefillRound{round(400, 300, 0.5)}, PrefillRoundStats{Fraction: 0.5, FractionMin: 0.5, FractionMax: 0.5, FractionMix: 0.55, Int8GopsMin: 400, Int8GopsMax: 400}},
		// At 200 Gop/s int8 (150 Q8_0) a token takes 1.5 s (mix 1.7 s).
		{"three: the middle one", []PrefillRound{round(400, 300, 0.9), round(200, 150, 0.5), round(400, 300, 0.4)},
			// The compute limit's fractions 0.9, 0.75 and 0.4 have mean
			// 2.05/3 and squared deviations summing to 0.131667; the mix
			// limit's 0.99, 0.85 and 0.44 mean 0.76 and 0.1634.
			PrefillRoundStats{Fraction: 0.75, FractionMin: 0.4, FractionMax: 0.9, FractionMix: 0.85, Int8GopsMin: 200, Int8GopsMax: 400,
				FractionCILo: 2.05/3 - t2*math.Sqrt(0.131666666666666667/2/3), FractionCIHi: 2.05/3 + t2*math.Sqrt(0.131666666666666667/2/3),
				FractionMixCILo: 0.76 - t2*math.Sqrt(0.1634/2/3), FractionMixCIHi: 0.76 + t2*math.Sqrt(0.1634/2/3)}},
		{"no peak counts as 0", []PrefillRound{round(0, 0, 0.5)}, PrefillRoundStats{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := SummarizePrefillRounds(tc.rounds, mc, work)
			want := []float64{tc.want.Fraction, tc.want.FractionMin, tc.want.FractionMax, tc.want.FractionMix, tc.want.FractionVNNI, tc.want.Int8GopsMin, tc.want.Int8GopsMax,
				tc.want.FractionCILo, tc.want.FractionCIHi, tc.want.FractionMixCILo, tc.want.FractionMixCIHi, tc.want.FractionVNNICILo, tc.want.FractionVNNICIHi}
			have := []float64{got.Fraction, got.FractionMin, got.FractionMax, got.FractionMix, got.FractionVNNI, got.Int8GopsMin, got.Int8GopsMax,
				got.FractionCILo, got.FractionCIHi, got.FractionMixCILo, got.FractionMixCIHi, got.FractionVNNICILo, got.FractionVNNICIHi}
			require.InDeltaSlice(t, want, have, 1e-12)
		})
	}
}

// TestMeasurePrefillRounds runs three rounds on the tiny model and joins
// them into roofline rows that round-trip through Parquet.
func TestMeasurePrefillRounds(t *testing.T) {
	m, be, cfg := roundsSetup(t)
	var ticks int
	rounds, err := MeasurePrefillRounds(context.Background(), m, be, cfg, 8, 3, func(n int) { ticks += n })
	require.NoError(t, err)
	require.Len(t, rounds, 3)
	require.Equal(t, 4*8, ticks, "the untimed prefill and three rounds")
	for _, r := range rounds {
		require.Positive(t, r.Int8GopsAll)
		require.Positive(t, r.Q8_0GopsAll)
		require.Positive(t, r.PrefillTPS)
	}
	_, err = MeasurePrefillRounds(context.Background(), m, be, cfg, 8, 0, nil)
	require.Error(t, err, "no rounds")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = MeasurePrefillRounds(ctx, m, be, cfg, 8, 1, nil)
	require.ErrorIs(t, err, context.Canceled)

	parts, err := DecodeTraffic(m.File, m.Params)
	require.NoError(t, err)
	sp := Speed{PrefillTokens: 8, PrefillTPS: 100}
	meta := RunMeta{RunID: "prefill-rounds"}
	mc := Machine{ReadGBs1: 30, ReadGBsAll: 60, FMAGflopsAll: 100, Int8GopsAll: 200, Q8_0GopsAll: 150}
	path, err := WriteRun(t.TempDir(), RooflineTable, meta, RooflineRecords(meta, mc, parts, nil, sp, nil, rounds))
	require.NoError(t, err)
	rows, err := ReadRows[RooflineRecord](path)
	require.NoError(t, err)
	last := rows[len(rows)-1]
	st := SummarizePrefillRounds(rounds, mc, PrefillWork(parts, 8))
	require.Equal(t, int64(3), last.PrefillRounds)
	require.Equal(t, []float64{st.Fraction, st.FractionMin, st.FractionMax, st.FractionMix, st.Int8GopsMin, st.Int8GopsMax},
		[]float64{last.PrefillRoundFraction, last.PrefillRoundFractionMin, last.PrefillRoundFractionMax, last.PrefillRoundFractionMix,
			last.PrefillRoundInt8GopsAllMin, last.PrefillRoundInt8GopsAllMax})
	require.Positive(t, last.PrefillRoundFraction)
	require.Zero(t, last.DecodeRounds)
}
