package harness

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMedian checks the median of odd and even counts.
func TestMedian(t *testing.T) {
	require.Equal(t, 3.0, median([]float64{3}))
	require.InDelta(t, 2.5, median([]float64{1, 2, 3, 4}), 1e-12)
	require.InDelta(t, 3, median([]float64{1, 2, 3, 4, 100}), 1e-12)
	med, lo, hi := medianRange([]float64{0.8, 0.2, 0.6, 0.4})
	require.InDeltaSlice(t, []float64{0.5, 0.2, 0.8}, []float64{med, lo, hi}, 1e-12)
}
