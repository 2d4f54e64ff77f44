package harness

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/engine"
)

func TestRoundFractions(t *testing.T) {
	const bytes = 1e9 // a round at 10 GB/s decoding 5 tok/s reads 5 of 10 GB/s: 0.5
	round := func(gbs, tps float64) DecodeRound { return DecodeRound{ReadGBs: gbs, DecodeTPS: tps} }
	tests := []struct {
		name        string
		rounds      []DecodeRound
		med, lo, hi float64
	}{
		{"none", nil, 0, 0, 0},
		{"one", []DecodeRound{round(10, 5)}, 0.5, 0.5, 0.5},
		{"odd: the middle one", []DecodeRound{round(10, 9), round(20, 5), round(10, 4)}, 0.4, 0.25, 0.9},
		{"even: the mean of the middle two", []DecodeRound{round(10, 2), round(10, 8), round(10, 4), round(10, 6)}, 0.5, 0.2, 0.8},
		{"no bandwidth counts as 0", []DecodeRound{round(0, 5)}, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			med, lo, hi := RoundFractions(tc.rounds, bytes)
			require.InDelta(t, tc.med, med, 1e-12)
			require.InDelta(t, tc.lo, lo, 1e-12)
			require.InDelta(t, tc.hi, hi, 1e-12)
		})
	}
}

// TestMeasureDecodeRounds runs three rounds on the tiny model and joins
// them into roofline rows that round-trip through Parquet.
func TestMeasureDecodeRounds(t *testing.T) {
	m, err := engine.OpenTiny()
	require.NoError(t, err)
	be := cpu.New(2)
	defer be.Close()
	cfg := MachineConfig{BufferBytes: 8 << 20, Threads: 2, MinTime: 10 * time.Millisecond}
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
	path, err := WriteRun(t.TempDir(), RooflineTable, meta, RooflineRecords(meta, mc, parts, nil, Speed{DecodeTokens: 2}, rounds))
	require.NoError(t, err)
	rows, err := ReadRows[RooflineRecord](path)
	require.NoError(t, err)
	last := rows[len(rows)-1]
	med, lo, hi := RoundFractions(rounds, total.Bytes)
	require.Equal(t, int64(3), last.DecodeRounds)
	require.Equal(t, [3]float64{med, lo, hi}, [3]float64{last.DecodeRoundFraction, last.DecodeRoundFractionMin, last.DecodeRoundFractionMax})
	gbs := []float64{rounds[0].ReadGBs, rounds[1].ReadGBs, rounds[2].ReadGBs}
	require.Equal(t, min(gbs[0], gbs[1], gbs[2]), last.DecodeRoundReadGBsMin)
	require.Equal(t, max(gbs[0], gbs[1], gbs[2]), last.DecodeRoundReadGBsMax)
}
