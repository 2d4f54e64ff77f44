package cpu

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/harness/probe"
	"github.com/ds4-go/ds4/quant"
)

// benchSink keeps benchmark results alive.
var benchSink float32

// benchWeights returns a cols×rows matrix of type t filled with random bytes,
// every block's f16 scale set to a finite normal number of magnitude in
// [2^-6, 2^-5) (random scales could be Inf/NaN or slow subnormals). Quantizing
// real data would take far longer than the benchmark, and the dot kernels'
// cost does not depend on the values.
func benchWeights(b *testing.B, t quant.Type, cols, rows int) backends.Matrix {
	b.Helper()
	rb, err := t.RowBytes(cols)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, rb*rows)
	r := newRand(uint64(t))
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	bb := t.BlockBytes()
	for off := 0; off < len(data); off += bb {
		// Q8_0 and IQ2_XXS both start their block with the f16 scale.
		h := binary.LittleEndian.Uint16(data[off:])&0x83ff | 9<<10
		binary.LittleEndian.PutUint16(data[off:], h)
	}
	m, err := backends.NewMatrix("bench", t, []uint64{uint64(cols), uint64(rows)}, data)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func benchMatVec(b *testing.B, t quant.Type, cols, rows int) {
	w := benchWeights(b, t, cols, rows)
	x := randVec(newRand(1), cols, 1)
	dst := make([]float32, rows)
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			be := New(workers)
			defer be.Close()
			b.SetBytes(int64(len(w.Data)))
			b.ReportAllocs()
			for b.Loop() {
				be.MatVec(dst, w, x)
			}
			benchSink = dst[0]
		})
	}
}

// BenchmarkMatVecQ8_0 is an attention-sized 4096×4096 Q8_0 product (MB/s =
// weight bytes per second).
func BenchmarkMatVecQ8_0(b *testing.B) { benchMatVec(b, quant.Q8_0, 4096, 4096) }

// BenchmarkMatVecIQ2_XXS is one routed expert's gate/up projection: 2048
// rows of 4096 IQ2_XXS weights.
func BenchmarkMatVecIQ2_XXS(b *testing.B) { benchMatVec(b, quant.IQ2_XXS, 4096, 2048) }

// BenchmarkMatVecSplit streams 256 MiB of 4096-column Q8_0 rows as one
// matrix and as many smaller ones (MB/s = weight bytes per second), beside
// a plain read of the same bytes: what splitting a product's rows over the
// workers costs a small matrix.
func BenchmarkMatVecSplit(b *testing.B) {
	const cols, total = 4096, 61680 // 61680 rows of 4352 bytes: 256 MiB
	big := benchWeights(b, quant.Q8_0, cols, total)
	workers := runtime.GOMAXPROCS(0)
	b.Run("read", func(b *testing.B) {
		b.SetBytes(int64(len(big.Data)))
		sums := make([]uint64, workers)
		t := backends.TaskFunc(func(i int) {
			n := len(big.Data) / workers
			sums[i] = probe.ReadSum(big.Data[i*n : (i+1)*n])
		})
		be := New(workers)
		defer be.Close()
		for b.Loop() {
			be.Parallel(workers, t)
		}
		benchSink = float32(sums[0])
	})
	x := randVec(newRand(1), cols, 1)
	for _, rows := range []int{total, 15420, 3855, 1028, 257} {
		ms := make([]backends.Matrix, total/rows)
		for i := range ms {
			var err error
			ms[i], err = backends.NewMatrix("split", quant.Q8_0, []uint64{cols, uint64(rows)}, big.Data[i*rows*len(big.Data)/total:(i+1)*rows*len(big.Data)/total])
			if err != nil {
				b.Fatal(err)
			}
		}
		dst := make([]float32, rows)
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			be := New(workers)
			defer be.Close()
			b.SetBytes(int64(len(big.Data)))
			for b.Loop() {
				for _, m := range ms {
					be.MatVec(dst, m, x)
				}
			}
			benchSink = dst[0]
		})
	}
}

// BenchmarkParallel measures the fixed cost of one Parallel call: waking
// the helpers and waiting for them, with pieces that do nothing.
func BenchmarkParallel(b *testing.B) {
	for _, n := range []int{2, 256} {
		b.Run(fmt.Sprintf("pieces=%d", n), func(b *testing.B) {
			be := New(0)
			defer be.Close()
			t := backends.TaskFunc(func(int) {})
			b.ReportAllocs()
			for b.Loop() {
				be.Parallel(n, t)
			}
		})
	}
}

// BenchmarkParallelScaling runs jobs of 16 busy pieces (20 µs to 1 ms of
// work in all) separated by a 50 µs serial gap, as the jobs of a forward
// pass are, and reports the speed-up over running the work on one
// goroutine: how soon the helpers join a job.
func BenchmarkParallelScaling(b *testing.B) {
	spin := func(d time.Duration) {
		for t := time.Now(); time.Since(t) < d; {
		}
	}
	const gap = 50 * time.Microsecond
	for _, d := range []time.Duration{20 * time.Microsecond, 200 * time.Microsecond, time.Millisecond} {
		b.Run(fmt.Sprintf("work=%v", d), func(b *testing.B) {
			be := New(0)
			defer be.Close()
			t := backends.TaskFunc(func(int) { spin(d / 16) })
			start := time.Now()
			for b.Loop() {
				be.Parallel(16, t)
				spin(gap)
			}
			job := time.Since(start)/time.Duration(b.N) - gap
			b.ReportMetric(float64(d)/float64(job), "speedup")
		})
	}
}

// BenchmarkExperts is the routed experts of one decode step: the gate and
// up projections of 6 IQ2_XXS experts as one MatMulBatch (one shared
// quantized input) against 12 MatVec calls (MB/s = weight bytes per second).
func BenchmarkExperts(b *testing.B) {
	const cols, rows, k = 4096, 2048, 6
	w := benchWeights(b, quant.IQ2_XXS, cols, rows*k)
	x := randVec(newRand(1), cols, 1)
	dst := make([]float32, 2*k*rows)
	experts := make([]backends.Matrix, k)
	for e := range experts {
		experts[e] = w.RowRange(e*rows, (e+1)*rows)
	}
	be := New(0)
	defer be.Close()
	b.Run("batch", func(b *testing.B) {
		ps := make([]backends.Product, 0, 2*k)
		for e := range k {
			// Gate and up alike: the same matrix twice keeps the bytes equal.
			ps = append(ps,
				backends.Product{Dst: dst[2*e*rows : (2*e+1)*rows], W: experts[e], X: x, N: 1},
				backends.Product{Dst: dst[(2*e+1)*rows : (2*e+2)*rows], W: experts[e], X: x, N: 1})
		}
		b.SetBytes(2 * int64(len(w.Data)))
		b.ReportAllocs()
		for b.Loop() {
			be.MatMulBatch(ps)
		}
	})
	b.Run("matvecs", func(b *testing.B) {
		b.SetBytes(2 * int64(len(w.Data)))
		b.ReportAllocs()
		for b.Loop() {
			for e := range k {
				be.MatVec(dst[2*e*rows:(2*e+1)*rows], experts[e], x)
				be.MatVec(dst[(2*e+1)*rows:(2*e+2)*rows], experts[e], x)
			}
		}
	})
}

// BenchmarkMatMulF16Prefill is a hyper-connection mix of prefill: 24 F16
// rows of 16384 applied to a chunk of 256 inputs of 16384 floats (16 MB,
// more than the L2 cache holds).
func BenchmarkMatMulF16Prefill(b *testing.B) {
	const cols, rows, n = 16384, 24, 256
	w := benchWeights(b, quant.F16, cols, rows)
	x := randVec(newRand(1), n*cols, 1)
	dst := make([]float32, n*rows)
	be := New(1)
	defer be.Close()
	for b.Loop() {
		be.MatMul(dst, w, x, n)
	}
	benchSink = dst[0]
}
