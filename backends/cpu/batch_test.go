package cpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// TestMatMulBatch checks a batch of mixed products (shared and strided
// inputs, strided outputs, experts, an empty product) against one MatMul
// per product on gathered inputs, bit for bit, for several worker counts.
func TestMatMulBatch(t *testing.T) {
	const cols = 512
	experts := testMatrix(t, quant.IQ2_XXS, cols, 40, 3, 1)
	q8 := testMatrix(t, quant.Q8_0, cols, 33, 1, 2)
	q2 := testMatrix(t, quant.Q2_K, cols, 17, 1, 3)
	f16 := testMatrix(t, quant.F16, cols, 21, 1, 4)
	down := testMatrix(t, quant.Q4_K, 256, 50, 2, 5)
	shared := randVec(newRand(1), 2*cols, 1)
	// Three inputs of cols floats every 600 floats.
	strided := randVec(newRand(2), 2*600+cols, 2)
	mids := randVec(newRand(3), 2*256, 1)
	type spec struct {
		w         backends.Matrix
		x         []float32
		n, xs, ds int
	}
	specs := []spec{
		{experts.Expert(2), shared, 2, 0, 0},
		{experts.Expert(0), shared, 2, 0, 0},
		{q8, shared, 2, 0, 0},
		{q8, strided, 3, 600, 40},
		{q2, shared[:cols], 1, 0, 0},
		{f16, strided, 3, 600, 0},
		{f16, strided, 3, 600, 30},
		{down.Expert(1), mids[256:], 1, 0, 0},
		{down.Expert(0), mids, 2, 0, 0},
		{q2, shared, 0, 0, 0},
	}
	// The reference: each product alone, inputs gathered back to back.
	want := make([][]float32, len(specs))
	ref := New(1)
	for i, s := range specs {
		x := make([]float32, s.n*s.w.Cols)
		for k := range s.n {
			copy(x[k*s.w.Cols:], s.x[k*stride(s.xs, s.w.Cols):][:s.w.Cols])
		}
		want[i] = make([]float32, s.n*s.w.Rows)
		ref.MatMul(want[i], s.w, x, s.n)
	}
	ref.Close()
	for _, workers := range []int{1, 2, 3} {
		be := New(workers)
		ps := make([]backends.Product, len(specs))
		for i, s := range specs {
			ds := stride(s.ds, s.w.Rows)
			dst := make([]float32, max(0, (s.n-1)*ds+s.w.Rows))
			ps[i] = backends.Product{Dst: dst, W: s.w, X: s.x, N: s.n, XStride: s.xs, DstStride: s.ds}
		}
		be.MatMulBatch(ps)
		for i, s := range specs {
			ds := stride(s.ds, s.w.Rows)
			for k := range s.n {
				require.Equal(t, bitsOf(want[i][k*s.w.Rows:(k+1)*s.w.Rows]), bitsOf(ps[i].Dst[k*ds:k*ds+s.w.Rows]),
					"workers %d product %d input %d", workers, i, k)
			}
		}
		if !raceEnabled {
			allocs := testing.AllocsPerRun(20, func() { be.MatMulBatch(ps) })
			require.Zero(t, allocs, "workers %d: allocations per batch", workers)
		}
		be.Close()
	}
}

func TestMatMulBatchBadShapes(t *testing.T) {
	be := New(2)
	defer be.Close()
	w := testMatrix(t, quant.Q8_0, 256, 20, 1, 6)
	x := randVec(newRand(4), 512, 1)
	for _, p := range []backends.Product{
		{Dst: make([]float32, 39), W: w, X: x, N: 2},
		{Dst: make([]float32, 40), W: w, X: x[:511], N: 2},
		{Dst: make([]float32, 40), W: w, X: x, N: 2, XStride: 300},
		{Dst: make([]float32, 40), W: w, X: x, N: 2, DstStride: 21},
		{Dst: make([]float32, 40), W: w, X: x, N: -1},
	} {
		require.Panics(t, func() { be.MatMulBatch([]backends.Product{p}) }, "%+v", p)
	}
}
