package harness

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMeanCI checks meanCI against intervals worked by hand: the 0.975
// quantile of Student's t is tan(0.475π) for one degree of freedom,
// 0.95·√(2/0.0975) for two (both closed forms) and 2.306004135 for eight
// (the printed tables).
func TestMeanCI(t *testing.T) {
	t1 := math.Tan(0.475 * math.Pi)  // 12.706
	t2 := 0.95 * math.Sqrt(2/0.0975) // 4.303
	const t8 = 2.306004135033371     // tables
	for _, tc := range []struct {
		name         string
		xs           []float64
		mean, lo, hi float64
	}{
		{"none", nil, 0, 0, 0},
		{"one: no interval", []float64{5}, 5, 0, 0},
		{"two: sd √2, se 1", []float64{10, 12}, 11, 11 - t1, 11 + t1},
		{"three: sd 1, se 1/√3", []float64{3, 1, 2}, 2, 2 - t2/math.Sqrt(3), 2 + t2/math.Sqrt(3)},
		{"nine: sd √7.5, se √7.5/3", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, 5, 5 - t8*math.Sqrt(7.5)/3, 5 + t8*math.Sqrt(7.5)/3},
		{"no spread", []float64{0.4, 0.4, 0.4}, 0.4, 0.4, 0.4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mean, lo, hi := meanCI(tc.xs)
			require.InDeltaSlice(t, []float64{tc.mean, tc.lo, tc.hi}, []float64{mean, lo, hi}, 1e-9)
		})
	}
}

// TestMedian checks the median of odd and even counts.
func TestMedian(t *testing.T) {
	require.Equal(t, 3.0, median([]float64{3}))
	require.InDelta(t, 2.5, median([]float64{1, 2, 3, 4}), 1e-12)
	require.InDelta(t, 3, median([]float64{1, 2, 3, 4, 100}), 1e-12)
	med, lo, hi := medianRange([]float64{0.8, 0.2, 0.6, 0.4})
	require.InDeltaSlice(t, []float64{0.5, 0.2, 0.8}, []float64{med, lo, hi}, 1e-12)
}
