package cpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// TestMatMulTokenCounts checks MatMul against one MatVec per input, bit
// for bit, for every token count from 1 to 9 and every kernel set: Run
// applies Q8_0, Q2_K and IQ2_XXS rows to groups of four tokens and, with
// the vector kernels, Q2_K and IQ2_XXS rows to three tokens left over with
// one more four-token call, so the counts take every mix of paths.
func TestMatMulTokenCounts(t *testing.T) {
	sets := append([]quant.Kernels{quant.GenericKernels()}, quant.VectorKernelSets()...)
	for _, typ := range matTypes {
		t.Run(typ.String(), func(t *testing.T) {
			const cols, rows, maxN = 512, 19, 9
			w := testMatrix(t, typ, cols, rows, 1, uint64(typ)+21)
			x := randVec(newRand(uint64(typ)+22), maxN*cols, 1)
			// Inputs of different magnitudes, so that their quantized
			// blocks differ in scale and not only in codes.
			for k := range maxN {
				for i := k * cols; i < (k+1)*cols; i++ {
					x[i] *= pow2(3*k - 12)
				}
			}
			for _, k := range sets {
				be := NewWithKernels(2, k)
				want := make([]float32, maxN*rows)
				for tok := range maxN {
					be.MatVec(want[tok*rows:(tok+1)*rows], w, x[tok*cols:(tok+1)*cols])
				}
				for n := 1; n <= maxN; n++ {
					got := make([]float32, n*rows)
					be.MatMul(got, w, x[:n*cols], n)
					require.Equal(t, bitsOf(want[:n*rows]), bitsOf(got), "%s kernels, %d tokens", k.Name, n)
				}
				be.Close()
			}
		})
	}
}

// TestMatMulParallelQuantize covers batches large enough to quantize their
// inputs on the workers (parallelQuantizeElems): a batch of two products
// of different activation kinds, one of them strided, against one MatVec
// per input, bit for bit.
func TestMatMulParallelQuantize(t *testing.T) {
	const cols, rows, n = 4096, 7, 5
	require.GreaterOrEqual(t, n*cols, parallelQuantizeElems)
	a := testMatrix(t, quant.Q8_0, cols, rows, 1, 31)
	b := testMatrix(t, quant.IQ2_XXS, cols, rows, 1, 32)
	x := randVec(newRand(33), 2*n*cols, 1) // b reads every other row of x
	be := New(2)
	defer be.Close()
	gotA := make([]float32, n*rows)
	gotB := make([]float32, n*rows)
	be.MatMulBatch([]backends.Product{
		{Dst: gotA, W: a, X: x[:n*cols], N: n},
		{Dst: gotB, W: b, X: x, N: n, XStride: 2 * cols},
	})
	want := make([]float32, rows)
	for tok := range n {
		be.MatVec(want, a, x[tok*cols:(tok+1)*cols])
		require.Equal(t, bitsOf(want), bitsOf(gotA[tok*rows:(tok+1)*rows]), "Q8_0 token %d", tok)
		be.MatVec(want, b, x[2*tok*cols:(2*tok+1)*cols])
		require.Equal(t, bitsOf(want), bitsOf(gotB[tok*rows:(tok+1)*rows]), "IQ2_XXS token %d", tok)
	}
}
