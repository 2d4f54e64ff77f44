// Package cpu is the pure-Go compute backend: reference kernels run on a
// persistent worker pool sized to the machine.
package cpu

import (
	"encoding/binary"
	"runtime"
	"sync"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// Backend is the CPU implementation of backends.Backend.
type Backend struct {
	workers int
	tasks   chan task
	wg      sync.WaitGroup // running workers
	scratch sync.Pool      // *actScratch
}

type task struct {
	fn     func(i int)
	lo, hi int
	done   *sync.WaitGroup
}

// New starts a backend with the given number of workers (0: GOMAXPROCS).
func New(workers int) *Backend {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	b := &Backend{workers: workers, tasks: make(chan task, 4*workers)}
	b.scratch.New = func() any { return new(actScratch) }
	// The calling goroutine works too, so workers-1 helpers suffice.
	for range workers - 1 {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for t := range b.tasks {
				for i := t.lo; i < t.hi; i++ {
					t.fn(i)
				}
				t.done.Done()
			}
		}()
	}
	return b
}

var _ backends.Backend = (*Backend)(nil)

// Close stops the workers.
func (b *Backend) Close() {
	close(b.tasks)
	b.wg.Wait()
}

// Workers returns the number of goroutines that run kernels.
func (b *Backend) Workers() int { return b.workers }

// Parallel runs fn(i) for i in [0, n), split into contiguous ranges over
// the workers, and waits for all of them.
func (b *Backend) Parallel(n int, fn func(i int)) {
	if n <= 0 {
		return
	}
	if b.workers == 1 || n == 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	parts := min(n, 4*b.workers)
	var done sync.WaitGroup
	done.Add(parts - 1)
	for p := 1; p < parts; p++ {
		b.tasks <- task{fn: fn, lo: p * n / parts, hi: (p + 1) * n / parts, done: &done}
	}
	for i := 0; i < n/parts; i++ {
		fn(i)
	}
	done.Wait()
}

// actScratch holds one quantized activation.
type actScratch struct {
	q80 []quant.BlockQ8_0
	q8k []quant.BlockQ8K
}

// rowsPerTask groups rows so each task is worth scheduling.
const rowsPerTask = 16

// MatVec computes dst = w·x; see backends.Backend.
func (b *Backend) MatVec(dst []float32, w backends.Matrix, x []float32) {
	b.MatMul(dst, w, x, 1)
}

// MatMul computes n matrix-vector products with one pass over the weights:
// each task takes a range of rows and applies them to every input, so a
// row is read from memory once per call.
func (b *Backend) MatMul(dst []float32, w backends.Matrix, x []float32, n int) {
	cols, rows := w.Cols, w.Rows
	s := b.scratch.Get().(*actScratch)
	defer b.scratch.Put(s)
	switch w.Type {
	case quant.Q8_0:
		nb := cols / 32
		s.q80 = grow(s.q80, n*nb)
		for t := range n {
			quant.QuantizeQ8_0(x[t*cols:(t+1)*cols], s.q80[t*nb:(t+1)*nb])
		}
	case quant.Q2_K, quant.Q4_K, quant.IQ2_XXS:
		nb := cols / quant.QK_K
		s.q8k = grow(s.q8k, n*nb)
		for t := range n {
			quant.QuantizeQ8K(x[t*cols:(t+1)*cols], s.q8k[t*nb:(t+1)*nb])
		}
	}
	dot := b.rowDot(w, x, s, cols)
	tasks := (rows + rowsPerTask - 1) / rowsPerTask
	b.Parallel(tasks, func(ti int) {
		r1 := min(rows, (ti+1)*rowsPerTask)
		for r := ti * rowsPerTask; r < r1; r++ {
			row := w.Data[r*w.RowBytes : (r+1)*w.RowBytes]
			for t := range n {
				dst[t*rows+r] = dot(row, t)
			}
		}
	})
}

// rowDot returns the dot kernel of w's type against input t.
func (b *Backend) rowDot(w backends.Matrix, x []float32, s *actScratch, cols int) func(row []byte, t int) float32 {
	switch w.Type {
	case quant.Q8_0:
		nb := cols / 32
		return func(row []byte, t int) float32 { return quant.DotQ8_0(row, s.q80[t*nb:(t+1)*nb]) }
	case quant.Q2_K:
		nb := cols / quant.QK_K
		return func(row []byte, t int) float32 { return quant.DotQ2K(row, s.q8k[t*nb:(t+1)*nb]) }
	case quant.Q4_K:
		nb := cols / quant.QK_K
		return func(row []byte, t int) float32 { return quant.DotQ4K(row, s.q8k[t*nb:(t+1)*nb]) }
	case quant.IQ2_XXS:
		nb := cols / quant.QK_K
		return func(row []byte, t int) float32 { return quant.DotIQ2XXS(row, s.q8k[t*nb:(t+1)*nb]) }
	case quant.F16:
		return func(row []byte, t int) float32 { return quant.DotF16(row, x[t*cols:(t+1)*cols]) }
	case quant.BF16:
		return func(row []byte, t int) float32 { return DotBF16(row, x[t*cols:(t+1)*cols]) }
	case quant.F32:
		return func(row []byte, t int) float32 { return quant.DotF32(row, x[t*cols:(t+1)*cols]) }
	}
	panic("cpu: matvec on unsupported weight type " + w.Type.String())
}

// DotBF16 is a sequential float32 dot of a BF16 row with x.
func DotBF16(w []byte, x []float32) float32 {
	w = w[:2*len(x)]
	var s float32
	for i, v := range x {
		s += float32(quant.BF16ToF32(binary.LittleEndian.Uint16(w[2*i:])) * v)
	}
	return s
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
