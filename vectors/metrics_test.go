package vectors

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKLHandComputed(t *testing.T) {
	// p = softmax(0, ln 3) = (1/4, 3/4); q = softmax(0, 0) = (1/2, 1/2).
	// KL = 1/4·ln(1/2) + 3/4·ln(3/2).
	want := 0.25*math.Log(0.5) + 0.75*math.Log(1.5)
	require.InDelta(t, want, KL([]float32{0, float32(math.Log(3))}, []float32{0, 0}), 1e-7)
	require.Zero(t, KL([]float32{1, 2, 3}, []float32{11, 12, 13}), "shift invariance")
}

func TestCompare(t *testing.T) {
	ref := []float32{0, 1, 2, 5, 0, 0}
	got := []float32{0, 1, 2.5, 0, 5, 0}
	m, err := Compare(ref, got, 3)
	require.NoError(t, err)
	require.Equal(t, 2, m.Positions)
	require.Equal(t, 5.0, m.MaxAbsDelta)
	require.Equal(t, 0.5, m.Top1)
	k0 := KL(ref[:3], got[:3])
	k1 := KL(ref[3:], got[3:])
	require.InDelta(t, (k0+k1)/2, m.MeanKL, 1e-12)
	require.InDelta(t, max(k0, k1), m.MaxKL, 1e-12)
	require.InDelta(t, (k0+k1)/2, m.MedianKL, 1e-12)
	_, err = Compare(ref, got[:3], 3)
	require.Error(t, err)

	require.NoError(t, BarB.Check(Metrics{MeanKL: 0.1, MaxKL: 1, Top1: 0.7}))
	err = BarA.Check(Metrics{MedianKL: 1, P90KL: 1, MeanKL: 1, MaxKL: 1, Top1: 0.5})
	require.ErrorContains(t, err, "median KL")
	require.ErrorContains(t, err, "top-1 50.0% < 100.0%")
}

func TestReadLogits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.bin")
	require.NoError(t, os.WriteFile(path, []byte{0, 0, 128, 63, 0, 0, 0, 64}, 0o644))
	x, err := ReadLogits(path, 2)
	require.NoError(t, err)
	require.Equal(t, []float32{1, 2}, x)
	_, err = ReadLogits(path, 3)
	require.ErrorContains(t, err, "whole number")
}

func TestCompareTargetsHandComputed(t *testing.T) {
	ln3 := float32(math.Log(3))
	// Position 0: p = (1/4, 3/4), q = (1/2, 1/2); position 1 identical rows.
	ref := []float32{0, ln3, ln3, 0}
	got := []float32{0, 0, ln3, 0}
	k0 := 0.25*math.Log(0.5) + 0.75*math.Log(1.5)
	m, stats, err := CompareTargets(ref, got, 2, nil)
	require.NoError(t, err)
	require.Len(t, stats, 2)
	require.InDelta(t, k0, stats[0].KL, 1e-7)
	require.InDelta(t, 0, stats[1].KL, 1e-12)
	require.Equal(t, PositionStat{Position: 0, KL: stats[0].KL, DeltaP: stats[0].DeltaP, RefTop: 1, RunTop: 0, Target: 1, NLLRef: stats[0].NLLRef, NLLRun: stats[0].NLLRun}, stats[0])
	require.InDelta(t, -0.25, stats[0].DeltaP, 1e-7)
	require.InDelta(t, k0/2, m.MeanKL, 1e-7)
	require.InDelta(t, k0/2, m.MedianKL, 1e-7)
	require.InDelta(t, 0.9*k0, m.P90KL, 1e-7)
	require.InDelta(t, 0.99*k0, m.P99KL, 1e-7)
	require.InDelta(t, k0, m.MaxKL, 1e-7)
	require.Equal(t, 0.5, m.Top1)
	require.InDelta(t, math.Sqrt(1.0/32), m.RMSDeltaP, 1e-7)
	require.InDelta(t, math.Log(4.0/3), m.NLLRef, 1e-7)
	require.InDelta(t, (math.Log(2)+math.Log(4.0/3))/2, m.NLLRun, 1e-7)
	require.InDelta(t, (math.Log(2)+math.Log(4.0/3))/2/math.Log(4.0/3), m.NLLRatio, 1e-6)
	require.Equal(t, float64(ln3), m.MaxAbsDelta)

	// Explicit targets: 0 then 1 (p = 1/4 both times; q = 1/2, 1/4).
	m, _, err = CompareTargets(ref, got, 2, []int{0, 1})
	require.NoError(t, err)
	require.InDelta(t, math.Log(4), m.NLLRef, 1e-7)
	require.InDelta(t, 1.5*math.Log(2), m.NLLRun, 1e-7)
	require.InDelta(t, 0.75, m.NLLRatio, 1e-7)
	require.InDelta(t, math.Sqrt((1.0/16)/2), m.RMSDeltaP, 1e-7)

	// The ratio's edge cases.
	require.Equal(t, 1.0, Summarize([]PositionStat{{}}).NLLRatio)
	require.True(t, math.IsInf(Summarize([]PositionStat{{NLLRun: 1}}).NLLRatio, 1))
	require.Equal(t, Metrics{}, Summarize(nil))
}

func TestCompareStepsHandComputed(t *testing.T) {
	tt := func(s string, p float64) TopToken { return TopToken{ID: -1, Bytes: []byte(s), Logprob: math.Log(p)} }
	ref := []Step{{Selected: tt("A", 0.5), Top: []TopToken{tt("A", 0.5), tt("B", 0.3)}}}
	run := []Step{{Selected: tt("B", 0.6), Top: []TopToken{tt("B", 0.6), tt("C", 0.2)}}}
	m, stats, err := CompareSteps(ref, run)
	require.NoError(t, err)
	// A is unlisted in the run: it gets min(0.2/2, 0.2) = 0.1; the rest
	// bucket 1 − 0.7 = 0.3 against the reference's 0.2.
	wantKL := 0.5*math.Log(0.5/0.1) + 0.3*math.Log(0.3/0.6) + 0.2*math.Log(0.2/0.3)
	require.InDelta(t, wantKL, stats[0].KL, 1e-9)
	require.False(t, stats[0].SameTop1)
	require.Equal(t, 0.0, m.Top1)
	require.InDelta(t, 0.1-0.5, stats[0].DeltaP, 1e-9)
	require.InDelta(t, math.Log(2), m.NLLRef, 1e-9)
	require.InDelta(t, math.Log(10), m.NLLRun, 1e-9)
	// Identical lists: KL 0, same top-1.
	m, _, err = CompareSteps(ref, ref)
	require.NoError(t, err)
	require.InDelta(t, 0, m.MaxKL, 1e-12)
	require.Equal(t, 1.0, m.Top1)
	require.Equal(t, 1.0, m.NLLRatio)
	_, _, err = CompareSteps(ref, nil)
	require.Error(t, err)
}

// TestQuantile checks quantile against type-7 quantiles worked by hand:
// position q·(n−1) between the order statistics.
func TestQuantile(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		q    float64
		want float64
	}{
		{[]float64{7}, 0.5, 7},
		{[]float64{7}, 0.99, 7},
		{[]float64{1, 2, 3, 4}, 0.5, 2.5}, // position 1.5
		{[]float64{1, 2, 3, 4}, 0.9, 3.7}, // position 2.7
		{[]float64{1, 2, 3, 4}, 0, 1},     // position 0
		{[]float64{1, 2, 3, 4}, 1, 4},     // position 3
		{[]float64{0, 10, 20, 30, 40}, 0.5, 20},
		{[]float64{0, 10, 20, 30, 40}, 0.99, 39.6}, // position 3.96
	} {
		require.InDelta(t, tc.want, quantile(tc.xs, tc.q), 1e-12, "%v at %v", tc.xs, tc.q)
	}
}
