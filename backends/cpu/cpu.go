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

// Backend is the CPU implementation of backends.Backend. Kernels run on
// persistent workers; the per-call state of a matrix product comes from a
// pool, so steady-state decoding allocates nothing.
type Backend struct {
	workers int
	k       quant.Kernels
	tasks   chan task
	wg      sync.WaitGroup // running workers
	jobs    sync.Pool      // *matJob
}

type task struct {
	t      backends.Task
	lo, hi int
	done   *sync.WaitGroup
}

// New starts a backend with the given number of workers (0: GOMAXPROCS)
// and the fastest dot kernels of this CPU (quant.BestKernels).
func New(workers int) *Backend {
	return NewWithKernels(workers, quant.BestKernels())
}

// NewWithKernels starts a backend that runs the given dot kernels.
func NewWithKernels(workers int, k quant.Kernels) *Backend {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	b := &Backend{workers: workers, k: k, tasks: make(chan task, 4*workers)}
	b.jobs.New = func() any { return new(matJob) }
	// The calling goroutine works too, so workers-1 helpers suffice.
	for range workers - 1 {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for t := range b.tasks {
				for i := t.lo; i < t.hi; i++ {
					t.t.Run(i)
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

// Kernels returns the dot kernels the backend runs.
func (b *Backend) Kernels() quant.Kernels { return b.k }

// Workers returns the number of goroutines that run kernels.
func (b *Backend) Workers() int { return b.workers }

// Parallel runs t.Run(i) for i in [0, n), split into contiguous ranges over
// the workers, and waits for all of them.
func (b *Backend) Parallel(n int, t backends.Task) {
	var done sync.WaitGroup
	b.parallel(n, t, &done)
}

func (b *Backend) parallel(n int, t backends.Task, done *sync.WaitGroup) {
	if n <= 0 {
		return
	}
	if b.workers == 1 || n == 1 {
		for i := range n {
			t.Run(i)
		}
		return
	}
	parts := min(n, 4*b.workers)
	done.Add(parts - 1)
	for p := 1; p < parts; p++ {
		b.tasks <- task{t: t, lo: p * n / parts, hi: (p + 1) * n / parts, done: done}
	}
	for i := 0; i < n/parts; i++ {
		t.Run(i)
	}
	// Help drain the queue instead of idling while the helpers work: with
	// only the helpers running the queued parts, 2 workers would split a
	// job 1:7. A task taken from another caller's job is fine, since each
	// task signals its own WaitGroup.
	for {
		var tk task
		select {
		case tk = <-b.tasks:
		default:
			done.Wait()
			return
		}
		for i := tk.lo; i < tk.hi; i++ {
			tk.t.Run(i)
		}
		tk.done.Done()
	}
}

// matJob is one matrix product: the weights, the quantized or float inputs
// and the output, split into tasks of rowsPerTask rows.
type matJob struct {
	k    *quant.Kernels
	w    backends.Matrix
	x    []float32
	dst  []float32
	n    int
	q80  []quant.BlockQ8_0
	q8k  []quant.BlockQ8K
	done sync.WaitGroup
}

// rowsPerTask groups rows so each task is worth scheduling.
const rowsPerTask = 16

// MatVec computes dst = w·x; see backends.Backend.
func (b *Backend) MatVec(dst []float32, w backends.Matrix, x []float32) {
	b.MatMul(dst, w, x, 1)
}

// MatMul computes n matrix-vector products with one pass over the weights:
// each task takes a range of rows and applies them to every input, so a
// row is read from memory once per call. Inputs of quantized weights are
// quantized once per call, not once per row.
func (b *Backend) MatMul(dst []float32, w backends.Matrix, x []float32, n int) {
	j := b.jobs.Get().(*matJob)
	j.k, j.w, j.x, j.dst, j.n = &b.k, w, x, dst, n
	cols := w.Cols
	switch w.Type {
	case quant.Q8_0:
		nb := cols / 32
		j.q80 = grow(j.q80, n*nb)
		for t := range n {
			quant.QuantizeQ8_0(x[t*cols:(t+1)*cols], j.q80[t*nb:(t+1)*nb])
		}
	case quant.Q2_K, quant.Q4_K, quant.IQ2_XXS:
		nb := cols / quant.QK_K
		j.q8k = grow(j.q8k, n*nb)
		for t := range n {
			quant.QuantizeQ8K(x[t*cols:(t+1)*cols], j.q8k[t*nb:(t+1)*nb])
		}
	case quant.F16, quant.BF16, quant.F32:
	default:
		panic("cpu: matvec on unsupported weight type " + w.Type.String())
	}
	b.parallel((w.Rows+rowsPerTask-1)/rowsPerTask, j, &j.done)
	j.w, j.x, j.dst = backends.Matrix{}, nil, nil
	b.jobs.Put(j)
}

// Run computes the rows of task i for every input.
func (j *matJob) Run(i int) {
	w, cols, rows := j.w, j.w.Cols, j.w.Rows
	r1 := min(rows, (i+1)*rowsPerTask)
	for r := i * rowsPerTask; r < r1; r++ {
		row := w.Data[r*w.RowBytes : (r+1)*w.RowBytes]
		for t := range j.n {
			var v float32
			switch w.Type {
			case quant.Q8_0:
				nb := cols / 32
				v = j.k.Q8_0(row, j.q80[t*nb:(t+1)*nb])
			case quant.Q2_K:
				nb := cols / quant.QK_K
				v = j.k.Q2K(row, j.q8k[t*nb:(t+1)*nb])
			case quant.Q4_K:
				nb := cols / quant.QK_K
				v = j.k.Q4K(row, j.q8k[t*nb:(t+1)*nb])
			case quant.IQ2_XXS:
				nb := cols / quant.QK_K
				v = j.k.IQ2XXS(row, j.q8k[t*nb:(t+1)*nb])
			case quant.F16:
				v = j.k.F16(row, j.x[t*cols:(t+1)*cols])
			case quant.BF16:
				v = DotBF16(row, j.x[t*cols:(t+1)*cols])
			case quant.F32:
				v = j.k.F32(row, j.x[t*cols:(t+1)*cols])
			}
			j.dst[t*rows+r] = v
		}
	}
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
