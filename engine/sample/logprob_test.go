package sample

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTopLogprobs(t *testing.T) {
	// Hand-computed: log Σ exp over {1, 2, 3, 3, 0.5} (the -Inf and NaN are
	// not tokens) = 3 + log(2 + e^-1 + e^-2 + e^-2.5).
	logits := []float32{1, 2, 3, -inf, 3, nan, 0.5}
	lse := 3 + math.Log(2+math.Exp(-1)+math.Exp(-2)+math.Exp(-2.5))
	lp := func(v float64) float32 { return float32(v - lse) }
	tests := []struct {
		name string
		k    int
		want []TokenLogprob
	}{
		{"zero", 0, []TokenLogprob{}},
		{"negative", -3, []TokenLogprob{}},
		{"one, tie to lower id", 1, []TokenLogprob{{2, lp(3)}}},
		{"three", 3, []TokenLogprob{{2, lp(3)}, {4, lp(3)}, {1, lp(2)}}},
		{"all finite", 5, []TokenLogprob{{2, lp(3)}, {4, lp(3)}, {1, lp(2)}, {0, lp(1)}, {6, lp(0.5)}}},
		{"more than finite", 7, []TokenLogprob{{2, lp(3)}, {4, lp(3)}, {1, lp(2)}, {0, lp(1)}, {6, lp(0.5)}}},
		{"more than vocab", 100, []TokenLogprob{{2, lp(3)}, {4, lp(3)}, {1, lp(2)}, {0, lp(1)}, {6, lp(0.5)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TopLogprobs(logits, tt.k, nil)
			require.Len(t, got, len(tt.want))
			for i := range got {
				require.Equal(t, tt.want[i].ID, got[i].ID, "rank %d", i)
				require.InDelta(t, tt.want[i].Logprob, got[i].Logprob, 1e-6, "rank %d", i)
			}
		})
	}
}

func TestTopLogprobsReusesDst(t *testing.T) {
	logits := []float32{0, 1, 2}
	dst := make([]TokenLogprob, 5, 8)
	got := TopLogprobs(logits, 2, dst)
	require.Len(t, got, 2)
	require.Same(t, &dst[0], &got[0])
	require.Equal(t, []int{2, 1}, []int{got[0].ID, got[1].ID})
}

func TestTopLogprobsStable(t *testing.T) {
	// Huge logits would overflow a naive softmax; the top one must still be
	// log(1/(1+e^-1)) and all results finite.
	logits := []float32{1e30, 1e30 - 1e24, -1e30}
	got := TopLogprobs(logits, 3, nil)
	require.Len(t, got, 3)
	require.Equal(t, 0, got[0].ID)
	require.InDelta(t, 0, got[0].Logprob, 1e-6) // 1e24 apart: the rest vanish
	for _, g := range got {
		require.False(t, math.IsNaN(float64(g.Logprob)))
	}
	small := []float32{1000, 999}
	got = TopLogprobs(small, 2, nil)
	require.InDelta(t, -math.Log1p(math.Exp(-1)), got[0].Logprob, 1e-6)
	require.InDelta(t, -1-math.Log1p(math.Exp(-1)), got[1].Logprob, 1e-6)
}

func TestTopLogprobsLargeVocab(t *testing.T) {
	logits := testLogits(50000, 9)
	got := TopLogprobs(logits, 20, nil)
	require.Len(t, got, 20)
	for i, g := range got {
		require.InDelta(t, Logprob(logits, g.ID), g.Logprob, 1e-6)
		if i > 0 {
			require.LessOrEqual(t, g.Logprob, got[i-1].Logprob)
		}
	}
	// Nothing outside the list beats its last entry.
	in := map[int]bool{}
	for _, g := range got {
		in[g.ID] = true
	}
	for id, v := range logits {
		if !in[id] {
			require.LessOrEqual(t, v, logits[got[19].ID])
		}
	}
}

func TestLogprob(t *testing.T) {
	logits := []float32{1, 2, 3, -inf, nan, inf}
	lse := math.Log(math.Exp(1) + math.Exp(2) + math.Exp(3))
	require.InDelta(t, 1-lse, Logprob(logits, 0), 1e-6)
	require.InDelta(t, 3-lse, Logprob(logits, 2), 1e-6)
	for _, id := range []int{3, 4, 5} {
		require.True(t, math.IsInf(float64(Logprob(logits, id)), -1), "id %d", id)
	}
	require.InDelta(t, lse, LogSumExp(logits), 1e-12)
	require.True(t, math.IsInf(LogSumExp([]float32{-inf, nan}), -1))
	require.True(t, math.IsInf(LogSumExp(nil), -1))
	require.Panics(t, func() { Logprob(logits, 6) })

	// Log-probabilities of all tokens normalize.
	l := testLogits(1000, 10)
	var sum float64
	for id := range l {
		sum += math.Exp(float64(Logprob(l, id)))
	}
	require.InDelta(t, 1, sum, 1e-5)
}

func TestExpNeg(t *testing.T) {
	var maxErr float64
	for i := 0; i <= 2_000_000; i++ {
		x := float32(-110 * float64(i) / 2_000_000)
		want := float32(math.Exp(float64(x)))
		got := expNeg(x)
		if want == 0 {
			require.LessOrEqual(t, got, float32(1e-45), "x=%v", x)
			continue
		}
		if want < 1.2e-38 { // subnormal: absolute error
			require.InDelta(t, want, got, 1.5e-45, "x=%v", x)
			continue
		}
		e := math.Abs(float64(got)-float64(want)) / float64(want)
		maxErr = max(maxErr, e)
	}
	require.LessOrEqual(t, maxErr, 0x1p-23) // at most one float32 ulp
	require.Equal(t, float32(1), expNeg(0))
	require.Equal(t, float32(1), expNeg(float32(math.Copysign(0, -1))))
	require.Equal(t, float32(0), expNeg(float32(math.Inf(-1))))
}
