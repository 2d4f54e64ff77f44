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
