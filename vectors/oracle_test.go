package vectors

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends/cpu"
	"github.com/ds4-go/ds4/convert/checkpoint"
)

var oracleCases = []string{"tiny_w16_r16", "flash_ratios_s300", "hd192_w8_r32", "pro_tiny_s320"}

// TestOracle converts each reference case losslessly, runs the prefill,
// decode and mixed paths and holds them to the oracle's bars.
func TestOracle(t *testing.T) {
	be := cpu.New(0)
	defer be.Close()
	for _, name := range oracleCases {
		t.Run(name, func(t *testing.T) {
			c, err := LoadOracle(filepath.Join("testdata", "oracle", name))
			require.NoError(t, err)
			res, err := RunOracle(c, checkpoint.ModeLossless, be)
			require.NoError(t, err)
			for _, p := range res.Paths {
				t.Log(formatRow(res, p))
			}
			require.NoError(t, res.Check())
		})
	}
}

func formatRow(r *OracleResult, p PathResult) string {
	a, b := p.VsF32Ref, p.VsOfficial
	return fmt.Sprintf("%-18s %-8s %-7s f32ref: max|Δ| %.2e meanKL %.2e medKL %.2e p90KL %.2e maxKL %.2e top1 %5.1f%% | official: meanKL %.3f maxKL %.3f top1 %5.1f%%",
		r.Case, r.Mode, p.Path, a.MaxAbsDelta, a.MeanKL, a.MedianKL, a.P90KL, a.MaxKL, 100*a.Top1, b.MeanKL, b.MaxKL, 100*b.Top1)
}
