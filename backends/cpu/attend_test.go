package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// referenceHead is the per-head attention that Attend replaced, written
// out again: scores by ops.dot in row order, the maximum from the sink up,
// then one pass adding each weight to the denominator and the weighted
// row by ops.axpy, scaled by the reciprocal of the sum.
func referenceHead(ops vecOps, acc, qh []float32, rows [][]float32, sink, scale float32, sj []float32) {
	mx := sink
	for j, row := range rows {
		sj[j] = ops.dot(qh, row) * scale
		mx = max(mx, sj[j])
	}
	den := expf(sink - mx)
	clear(acc)
	for j, row := range rows {
		wj := expf(sj[j] - mx)
		den += wj
		ops.axpy(acc, wj, row)
	}
	r := 1 / den
	for k := range acc {
		acc[k] *= r
	}
}

// attendReference runs referenceHead for every head, spread over be's
// workers one head a task when be has more than one; sj holds
// len(sinks)·len(rows) floats.
func attendReference(be *Backend, ops vecOps, out, q []float32, rows [][]float32, sinks []float32, scale float32, sj []float32) {
	d, n := len(q)/len(sinks), len(rows)
	head := func(h int) {
		referenceHead(ops, out[h*d:(h+1)*d], q[h*d:(h+1)*d], rows, sinks[h], scale, sj[h*n:(h+1)*n])
	}
	if be.workers == 1 {
		for h := range sinks {
			head(h)
		}
		return
	}
	be.Parallel(len(sinks), backends.TaskFunc(head))
}

// attendCase is one Attend input.
type attendCase struct {
	q, sinks []float32
	rows     [][]float32
	scale    float32
}

// newAttendCase draws heads×d queries, rows of d floats (each misaligned
// by one float, as rows of a cache need not be aligned) and sinks; every
// value is drawn by vals.
func newAttendCase(r *rand.Rand, heads, d, rows int, vals func(*rand.Rand, int) []float32) attendCase {
	c := attendCase{q: vals(r, heads*d), sinks: vals(r, heads), scale: float32(1 / math.Sqrt(float64(max(d, 1))))}
	c.rows = make([][]float32, rows)
	for j := range c.rows {
		c.rows[j] = vals(r, d+1)[1:]
	}
	return c
}

// normalVals returns n normal values of standard deviation 1.
func normalVals(r *rand.Rand, n int) []float32 { return randVec(r, n, 1) }

// TestAttendMatchesReference holds Attend, on the generic loops and on
// this CPU's fastest ones, serial and with its head groups over two
// workers, bit for bit to the per-head algorithm it replaced on the loops
// that define its float order (Dot and Axpy, or the AVX2 ones), at Flash's
// shape and at odd ones: a head dimension that is no multiple of 8, a
// single head, a head count no multiple of the group, no rows at all.
func TestAttendMatchesReference(t *testing.T) {
	gen := NewWithKernels(1, quant.GenericKernels())
	defer gen.Close()
	gen2 := NewWithKernels(2, quant.GenericKernels())
	defer gen2.Close()
	vec1 := New(1)
	defer vec1.Close()
	vec2 := New(2)
	defer vec2.Close()
	bes := []*Backend{gen, gen2, vec1, vec2}
	r := newRand(61)
	cases := []struct {
		heads, d, rows int
		vals           func(*rand.Rand, int) []float32
	}{
		{64, 512, 1, normalVals}, {64, 512, 33, normalVals}, {64, 512, 160, normalVals}, {64, 512, 200, normalVals},
		{64, 512, 40, func(r *rand.Rand, n int) []float32 { return oddVec(r, n, 0.002) }},
		{1, 512, 7, normalVals}, {1, 13, 5, normalVals}, {4, 13, 9, normalVals}, {5, 20, 3, normalVals},
		{6, 3, 4, normalVals}, {8, 8, 11, normalVals}, {4, 72, 6, normalVals}, {7, 600, 30, normalVals},
		{12, 603, 150, normalVals}, {32, 100, 330, normalVals}, {3, 64, 0, normalVals}, {4, 16, 0, normalVals},
	}
	for _, c := range cases {
		in := newAttendCase(r, c.heads, c.d, c.rows, c.vals)
		t.Run(fmt.Sprintf("h%d_d%d_rows%d", c.heads, c.d, c.rows), func(t *testing.T) {
			for _, be := range bes {
				want := make([]float32, c.heads*c.d)
				sj := make([]float32, c.heads*c.rows)
				attendReference(gen, referenceVecOps(be), want, in.q, in.rows, in.sinks, in.scale, sj)
				got := make([]float32, len(want))
				for i := range got {
					got[i] = 99 // overwritten
				}
				be.Attend(got, in.q, in.rows, in.sinks, in.scale)
				requireSameBits(t, want, got, "%s with %d workers", be.Kernels().Name, be.workers)
			}
		})
	}
}

// requireSameBits fails t at the first element where got and want differ
// in any bit, NaN payloads included.
func requireSameBits(t *testing.T, want, got []float32, format string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want), fmt.Sprintf(format, args...))
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			require.Failf(t, "bits differ", "element %d of %d: want %#08x (%v), got %#08x (%v): %s", i, len(want),
				math.Float32bits(want[i]), want[i], math.Float32bits(got[i]), got[i], fmt.Sprintf(format, args...))
		}
	}
}

// BenchmarkAttend is one Flash token's attention: 64 heads of 512 over 160
// rows. old is the per-head algorithm Attend replaced, on the loops that
// define its float order; new is Attend.
func BenchmarkAttend(b *testing.B) {
	const heads, d, rows = 64, 512, 160
	in := newAttendCase(newRand(5), heads, d, rows, normalVals)
	// Rows in one slab, as in the engine's caches.
	slab := make([]float32, 0, rows*d)
	for j, row := range in.rows {
		slab = append(slab, row...)
		in.rows[j] = slab[j*d : (j+1)*d]
	}
	out := make([]float32, heads*d)
	sj := make([]float32, heads*rows)
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		be := New(workers)
		ref := referenceVecOps(be)
		b.Run(fmt.Sprintf("workers=%d/old", workers), func(b *testing.B) {
			for b.Loop() {
				attendReference(be, ref, out, in.q, in.rows, in.sinks, in.scale, sj)
			}
		})
		b.Run(fmt.Sprintf("workers=%d/new", workers), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				be.Attend(out, in.q, in.rows, in.sinks, in.scale)
			}
		})
		be.Close()
	}
	benchSink = out[0]
}
