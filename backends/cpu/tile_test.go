package cpu

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// TestMatMulTile checks Q8_0 products of many inputs, which run on the
// tile kernel where a kernel set has one, against the set's Q8_0 row
// kernel (what decode runs) per row and input on the same quantized
// inputs, bit for bit: in full tiles, in the rows past the last one, below
// and above tileMinTokens, and with strided inputs and outputs in a batch.
func TestMatMulTile(t *testing.T) {
	const cols, rows = 512, 3*quant.Q8_0TileRows + 5
	w := testMatrix(t, quant.Q8_0, cols, rows, 1, 11)
	sets := append([]quant.Kernels{quant.GenericKernels()}, quant.VectorKernelSets()...)
	tiled := false
	for _, k := range sets {
		tiled = tiled || k.Q8_0Tile != nil
	}
	t.Logf("kernel sets with a tile kernel on this CPU: %v", tiled)
	for _, k := range sets {
		for _, n := range []int{tileMinTokens - 1, tileMinTokens, 13, 40} {
			t.Run(fmt.Sprintf("kernels=%s/n=%d", k.Name, n), func(t *testing.T) {
				const xs, ds = cols + 24, rows + 3
				x := randVec(newRand(uint64(n)), (n-1)*xs+cols, 1)
				for i := range cols { // one input of a much larger scale
					x[xs+i] *= 100
				}
				want := make([]float32, n*rows)
				q := make([]quant.BlockQ8_0, cols/32)
				for tok := range n {
					quant.QuantizeQ8_0(x[tok*xs:tok*xs+cols], q)
					for r := range rows {
						want[tok*rows+r] = k.Q8_0(w.Data[r*w.RowBytes:(r+1)*w.RowBytes], q)
					}
				}
				packed := make([]float32, n*cols)
				for tok := range n {
					copy(packed[tok*cols:], x[tok*xs:tok*xs+cols])
				}
				for _, workers := range []int{1, 2} {
					be := NewWithKernels(workers, k)
					got := make([]float32, n*rows)
					be.MatMul(got, w, packed, n)
					require.Equal(t, bitsOf(want), bitsOf(got), "MatMul, workers=%d", workers)

					strided := make([]float32, (n-1)*ds+rows)
					be.MatMulBatch([]backends.Product{{Dst: strided, W: w, X: x, N: n, XStride: xs, DstStride: ds}})
					for tok := range n {
						require.Equal(t, bitsOf(want[tok*rows:(tok+1)*rows]), bitsOf(strided[tok*ds:tok*ds+rows]), "strided, workers=%d input %d", workers, tok)
					}
					if !raceEnabled {
						allocs := testing.AllocsPerRun(10, func() { be.MatMul(got, w, packed, n) })
						require.Zero(t, allocs, "workers=%d: allocations per MatMul", workers)
					}
					be.Close()
				}
			})
		}
	}
}
