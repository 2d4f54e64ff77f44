package cpu

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// TestMatMulTile checks products of many inputs, which run on the tile
// kernels where a kernel set has them, against the set's row kernel (what
// decode runs) per row and input on the same quantized inputs, bit for
// bit: in full tiles, in the rows past the last one, below and above each
// type's threshold (Q8_0 below it: the multi-token row kernel Q8_0xN, of
// up to eight tokens a call, which the pure-Go set also runs above it;
// Q8_0 of rows of whole prepared groups: Q8_0xNPre from preMinQ8_0 to
// preMaxQ8_0 inputs where the set has it, rows of 512 elements, and
// Q8_0xN or the tiles on rows of 288, which are not whole groups), and
// with strided inputs and outputs in a batch.
func TestMatMulTile(t *testing.T) {
	const rows = 3*quant.Q8_0TileRows + 5
	sets := append([]quant.Kernels{quant.GenericKernels()}, quant.VectorKernelSets()...)
	types := []struct {
		typ  quant.Type
		cols int
		min  int
		tile func(quant.Kernels) bool
		dot  func(k quant.Kernels, row []byte, x []float32) float32
	}{
		{quant.Q8_0, 512, tileMinQ8_0, func(k quant.Kernels) bool { return k.Q8_0Tile != nil }, dotQ8_0},
		{quant.Q8_0, 288, tileMinQ8_0, func(k quant.Kernels) bool { return k.Q8_0Tile != nil }, dotQ8_0},
		{quant.IQ2_XXS, 768, tileMinIQ2XXS, func(k quant.Kernels) bool { return k.IQ2XXSTile != nil },
			func(k quant.Kernels, row []byte, x []float32) float32 {
				q := make([]quant.BlockQ8K, len(x)/quant.QK_K)
				quant.QuantizeQ8K(x, q)
				return k.IQ2XXS(row, q)
			}},
		{quant.Q2_K, 768, tileMinQ2K, func(k quant.Kernels) bool { return k.Q2KTile != nil },
			func(k quant.Kernels, row []byte, x []float32) float32 {
				q := make([]quant.BlockQ8K, len(x)/quant.QK_K)
				quant.QuantizeQ8K(x, q)
				return k.Q2K(row, q)
			}},
	}
	for _, tc := range types {
		w := testMatrix(t, tc.typ, tc.cols, rows, 1, 11+uint64(tc.typ))
		var tiled []string
		for _, k := range sets {
			if tc.tile(k) {
				tiled = append(tiled, k.Name)
			}
		}
		t.Logf("%v: kernel sets with a tile kernel on this CPU: %v", tc.typ, tiled)
		for _, k := range sets {
			ns := []int{tc.min - 1, tc.min, 13, 40}
			if tc.min > 3 { // Q8_0 below the tiles: Q8_0xN of 2 and 3 tokens
				ns = append([]int{2}, ns...)
			}
			if tc.typ == quant.Q8_0 { // both ends of Q8_0xNPre's range and past it
				ns = append(ns, preMinQ8_0, preMaxQ8_0, preMaxQ8_0+1)
			}
			for _, n := range ns {
				t.Run(fmt.Sprintf("%v/cols=%d/kernels=%s/n=%d", tc.typ, tc.cols, k.Name, n), func(t *testing.T) {
					cols := tc.cols
					xs, ds := cols+24, rows+3
					x := randVec(newRand(uint64(n)), (n-1)*xs+cols, 1)
					for i := 0; n > 1 && i < cols; i++ { // one input of a much larger scale
						x[xs+i] *= 100
					}
					want := make([]float32, n*rows)
					for tok := range n {
						for r := range rows {
							want[tok*rows+r] = tc.dot(k, w.Data[r*w.RowBytes:(r+1)*w.RowBytes], x[tok*xs:tok*xs+cols])
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
}

// dotQ8_0 is k's Q8_0 of a row and x quantized, decode's product.
func dotQ8_0(k quant.Kernels, row []byte, x []float32) float32 {
	q := make([]quant.BlockQ8_0, len(x)/32)
	quant.QuantizeQ8_0(x, q)
	return k.Q8_0(row, q)
}
