// Package cpu is the pure-Go compute backend: reference kernels run on a
// persistent worker pool sized to the machine.
package cpu

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// Backend is the CPU implementation of backends.Backend. Kernels run on
// persistent workers; the per-call state of a parallel job and of a matrix
// product comes from pools, so steady-state decoding allocates nothing.
type Backend struct {
	workers int
	k       quant.Kernels
	vec     vecOps     // attention's float32 loops, SIMD where k is
	wake    chan *work // one message per helper asked to join a job
	wg      sync.WaitGroup
	works   sync.Pool // *work
	jobs    sync.Pool // *matJob
	attends sync.Pool // *attendJob
	tiles   sync.Pool // *tileScratch
}

// work is one Parallel call. Its pieces are split into one contiguous
// range per worker that joins (the caller and its helpers), so each
// worker streams one stretch of weights that the hardware prefetchers
// follow from start to end. A worker takes its range's pieces one by one
// from the front; once it is empty, it steals the back half of the range
// with the most pieces left and goes on with that, so a job is balanced to
// within one piece whatever its pieces cost and however late a helper
// starts.
type work struct {
	t      backends.Task
	ranges []pieceRange               // one per worker that joins
	joined atomic.Int64               // workers that have claimed a range
	left   atomic.Int64               // helpers asked to join that have not finished
	done   sync.WaitGroup             // the same helpers, for a caller that stops spinning
	caught atomic.Pointer[PanicError] // the first panic of a piece, if any
}

// PanicError is a panic raised by a piece of a Parallel job, on whichever
// goroutine ran it; Parallel raises it again on its caller's goroutine
// once every worker has left the job, so that a fault in a kernel (a read
// of a memory-mapped file truncated under the process, with
// debug.SetPanicOnFault) fails the caller instead of the process.
type PanicError struct {
	Value any    // what the piece panicked with
	Stack []byte // the stack of the goroutine that ran the piece
}

func (e *PanicError) Error() string { return fmt.Sprintf("cpu: panic in a parallel job: %v", e.Value) }

// Unwrap returns the panic value when it is an error (a runtime.Error for
// a fault).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// pieceRange is the pieces [lo, hi) a worker has yet to start, packed as
// hi<<32 | lo so that one compare-and-swap moves either end. It fills a
// cache line of its own: its owner updates it once per piece.
type pieceRange struct {
	v atomic.Uint64
	_ [56]byte
}

// packRange packs the pieces [lo, hi) into a pieceRange value.
func packRange(lo, hi int) uint64 { return uint64(hi)<<32 | uint64(lo) }

// unpackRange returns the pieces [lo, hi) of a pieceRange value.
func unpackRange(v uint64) (lo, hi int) { return int(v & (1<<32 - 1)), int(v >> 32) }

// spinWait is how long an idle helper polls for the next job before it
// parks, and how long a caller polls for its helpers to finish before it
// blocks. Decode runs about 20 jobs a step with serial work of some
// 100 µs between them: a parked helper costs the caller a futex wake-up
// per job and starts late, and a parked caller costs the last helper a
// wake-up. Polling through such gaps burns at most this much of an
// otherwise idle core per job. The polling yields now and then: a
// goroutine back from a blocking system call (an expert's read, with SSD
// streaming) needs a P to run, and the pollers hold every P, so without
// the yield it waits for one to park or for the scheduler's 10 ms
// preemption while the disk sits idle.
const spinWait = 200 * time.Microsecond

// finish marks one helper of w as done.
func (w *work) finish() {
	w.left.Add(-1)
	w.done.Done()
}

// wait returns once every helper of w has finished, polling for up to
// spinWait before blocking.
func (w *work) wait() {
	deadline := time.Now().Add(spinWait)
	for i := 1; w.left.Load() > 0; i++ {
		if i%64 == 0 {
			if time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
	}
	w.done.Wait()
}

// nextWork returns the next job sent to the helpers, polling for up to
// spinWait before blocking, and false once the backend is closed.
func (b *Backend) nextWork() (*work, bool) {
	deadline := time.Now().Add(spinWait)
	for i := 1; ; i++ {
		select {
		case w, ok := <-b.wake:
			return w, ok
		default:
		}
		if i%64 == 0 {
			if time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
	}
	w, ok := <-b.wake
	return w, ok
}

// drain claims the next free range of w and runs its pieces, then steals
// pieces from the other ranges until none is left. A piece that panics
// ends this worker's share (the others steal what it leaves) and is
// recorded for the caller of Parallel.
func (w *work) drain() {
	defer w.catch()
	me := &w.ranges[w.joined.Add(1)-1]
	for {
		v := me.v.Load()
		lo, hi := unpackRange(v)
		if lo >= hi {
			if !w.steal(me) {
				return
			}
			continue
		}
		if me.v.CompareAndSwap(v, packRange(lo+1, hi)) {
			w.t.Run(lo)
		}
	}
}

// catch records the panic of a piece, the first one only.
func (w *work) catch() {
	if p := recover(); p != nil {
		w.caught.CompareAndSwap(nil, &PanicError{Value: p, Stack: debug.Stack()})
	}
}

// steal moves the back half of the fullest other range into me, which is
// empty, and reports whether there was one. Its owner keeps the front half,
// whose stream it is in the middle of.
func (w *work) steal(me *pieceRange) bool {
	for {
		var victim *pieceRange
		var v uint64
		most := 0
		for i := range w.ranges {
			r := &w.ranges[i]
			if r == me {
				continue
			}
			rv := r.v.Load()
			if lo, hi := unpackRange(rv); hi-lo > most {
				victim, v, most = r, rv, hi-lo
			}
		}
		if victim == nil {
			return false
		}
		lo, hi := unpackRange(v)
		mid := hi - (hi-lo+1)/2
		if victim.v.CompareAndSwap(v, packRange(lo, mid)) {
			me.v.Store(packRange(mid, hi))
			return true
		}
	}
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
	b := &Backend{workers: workers, k: k, vec: vecOpsFor(k), wake: make(chan *work, 4*workers)}
	b.works.New = func() any { return &work{ranges: make([]pieceRange, workers)} }
	b.jobs.New = func() any { return new(matJob) }
	b.attends.New = func() any { return new(attendJob) }
	b.tiles.New = func() any { return new(tileScratch) }
	// The calling goroutine works too, so workers-1 helpers suffice.
	for range workers - 1 {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			// Helpers read the weights, which may be a file mapping: a
			// fault there is a panic drain catches, not a crash.
			debug.SetPanicOnFault(true)
			for {
				w, ok := b.nextWork()
				if !ok {
					return
				}
				w.drain()
				w.finish()
			}
		}()
	}
	return b
}

var _ backends.Backend = (*Backend)(nil)

// Close stops the workers.
func (b *Backend) Close() {
	close(b.wake)
	b.wg.Wait()
}

// Kernels returns the dot kernels the backend runs.
func (b *Backend) Kernels() quant.Kernels { return b.k }

// Workers returns the number of goroutines that run kernels.
func (b *Backend) Workers() int { return b.workers }

// Parallel runs t.Run(i) for i in [0, n) on the workers and waits for all
// of them. If a piece panics, Parallel panics with a *PanicError once no
// worker runs the job any more, on the caller's goroutine whichever ran
// the piece.
func (b *Backend) Parallel(n int, t backends.Task) {
	if n <= 0 {
		return
	}
	if b.workers == 1 || n == 1 {
		for i := range n {
			t.Run(i)
		}
		return
	}
	if uint64(n) >= 1<<32 {
		panic(fmt.Sprintf("cpu: Parallel of %d pieces, more than a range holds", n))
	}
	w := b.works.Get().(*work)
	helpers := min(b.workers-1, n-1)
	w.t = t
	w.ranges = w.ranges[:helpers+1]
	for i := range w.ranges {
		w.ranges[i].v.Store(packRange(i*n/(helpers+1), (i+1)*n/(helpers+1)))
	}
	w.joined.Store(0)
	w.left.Store(int64(helpers))
	w.done.Add(helpers)
	for range helpers {
		b.wake <- w
	}
	w.drain()
	// Take back the wake-ups no helper has picked up yet (ours, or another
	// caller's, which is then helped): waiting for a busy helper to reach
	// a job that is already finished would only idle this goroutine, and
	// a Parallel nested in a piece could deadlock.
	for {
		select {
		case o := <-b.wake:
			o.drain()
			o.finish()
			continue
		default:
		}
		break
	}
	w.wait()
	w.t = nil
	caught := w.caught.Swap(nil)
	b.works.Put(w)
	if caught != nil {
		panic(caught)
	}
}

// matJob is one batch of matrix products: the products, their quantized
// inputs and the split of their rows into tasks of rowsPerTask rows.
type matJob struct {
	k      *quant.Kernels
	ps     []backends.Product
	one    [1]backends.Product // MatMul's product, so it allocates nothing
	start  []int               // first task of each product, then the total
	off    []int               // first quantized block of each product's inputs
	own    []bool              // whether a product quantizes its inputs itself
	qstart []int               // first owned input of each product, then the total
	q80    []quant.BlockQ8_0
	q80sum []int32 // each block of q80's code sum, for the tile kernel
	q80pre []byte  // q80 as quant.PrepareQ8_0 prepares it, from a 64-byte boundary of pre, for Q8_0xNPre
	pre    []byte
	q8k    []quant.BlockQ8K
	tiles  *sync.Pool // the backend's *tileScratch
	quads  []quadOut  // each task's four-token and F16x2x3 kernel results
}

// quadOut holds one task's results of a multi-token kernel. The kernels
// are called through function values, so a local array would escape to
// the heap once per row; one per task, padded to two cache lines so that
// concurrent tasks do not share one, allocates nothing per call.
type quadOut struct {
	v  [4]float32
	f6 [6]float32 // F16x2x3's results
	v8 [8]float32 // Q8_0xN's results
	_  [56]byte
}

// rowsPerTask groups rows so each task is worth scheduling. It is the
// rows of a tile (quant.Q8_0TileRows), so that the tasks of a product of
// many inputs each run one tile (runTile).
const rowsPerTask = quant.Q8_0TileRows

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
	j.one[0] = backends.Product{Dst: dst, W: w, X: x, N: n}
	b.run(j, j.one[:])
	j.one[0] = backends.Product{}
	b.jobs.Put(j)
}

// MatMulBatch computes every product of ps in one parallel job; see
// backends.Backend. One job instead of one per product saves a wake-up and
// a wait per product, and balances small products against large ones.
func (b *Backend) MatMulBatch(ps []backends.Product) {
	j := b.jobs.Get().(*matJob)
	b.run(j, ps)
	b.jobs.Put(j)
}

// actKind is the activation a weight type multiplies: float32 as is, or
// quantized to Q8_0 or Q8_K blocks.
type actKind int

const (
	actFloat actKind = iota
	actQ8_0
	actQ8K
)

func kindOf(t quant.Type) actKind {
	switch t {
	case quant.Q8_0:
		return actQ8_0
	case quant.Q2_K, quant.Q4_K, quant.IQ2_XXS:
		return actQ8K
	case quant.F16, quant.BF16, quant.F32:
		return actFloat
	}
	panic("cpu: matvec on unsupported weight type " + t.String())
}

// blockLen is the number of activation elements per quantized block.
func (k actKind) blockLen() int {
	if k == actQ8_0 {
		return 32
	}
	return quant.QK_K
}

func stride(s, def int) int {
	if s == 0 {
		return def
	}
	return s
}

// sameInputs reports whether two products read the same activations.
func sameInputs(a, b *backends.Product) bool {
	return a.N == b.N && a.W.Cols == b.W.Cols && len(a.X) == len(b.X) && len(a.X) > 0 &&
		&a.X[0] == &b.X[0] && stride(a.XStride, a.W.Cols) == stride(b.XStride, b.W.Cols)
}

// run checks the products, quantizes each distinct input once and runs
// every product's row tasks as one parallel job.
func (b *Backend) run(j *matJob, ps []backends.Product) {
	j.k, j.ps, j.tiles = &b.k, ps, &b.tiles
	j.start = grow(j.start, len(ps)+1)
	j.off = grow(j.off, len(ps))
	j.own = grow(j.own, len(ps))
	tasks, n80, n8k := 0, 0, 0
	for i := range ps {
		p := &ps[i]
		w := p.W
		if p.N < 0 || p.N > 0 && (len(p.X) < (p.N-1)*stride(p.XStride, w.Cols)+w.Cols || len(p.Dst) < (p.N-1)*stride(p.DstStride, w.Rows)+w.Rows) {
			panic(fmt.Sprintf("cpu: product %d with %s: %d inputs do not fit %d or %d outputs do not fit %d floats",
				i, w.Name, p.N, len(p.X), p.N, len(p.Dst)))
		}
		j.start[i] = tasks
		if p.N > 0 {
			tasks += (w.Rows + rowsPerTask - 1) / rowsPerTask
		}
		kind := kindOf(w.Type)
		j.off[i], j.own[i] = -1, false
		if kind == actFloat || p.N == 0 {
			continue
		}
		for k := range i {
			if kindOf(ps[k].W.Type) == kind && sameInputs(&ps[k], p) {
				j.off[i] = j.off[k]
				break
			}
		}
		if j.off[i] >= 0 {
			continue
		}
		nb := p.N * w.Cols / kind.blockLen()
		j.own[i] = true
		if kind == actQ8_0 {
			// Whole groups keep every prepared input on a cache line
			// boundary.
			n80 = (n80 + quant.Q8_0PreGroup - 1) &^ (quant.Q8_0PreGroup - 1)
			j.off[i], n80 = n80, n80+nb
		} else {
			j.off[i], n8k = n8k, n8k+nb
		}
	}
	j.start[len(ps)] = tasks
	j.quads = grow(j.quads, tasks)
	j.q80 = grow(j.q80, n80)
	if b.k.Q8_0Tile != nil {
		j.q80sum = grow(j.q80sum, n80)
	}
	if b.k.Q8_0xNPre != nil {
		n := preOff(n80)
		j.pre = grow(j.pre, n+63)
		a := int(-uintptr(unsafe.Pointer(unsafe.SliceData(j.pre))) & 63)
		j.q80pre = j.pre[a : a+n]
	}
	j.q8k = grow(j.q8k, n8k)
	// Each input a product owns is quantized once, on the workers when
	// there are enough of them to repay the extra job (a prefill chunk's
	// inputs: about a fifth of the caller's serial work otherwise).
	j.qstart = append(j.qstart[:0], 0)
	var elems int
	for i := range ps {
		n := 0
		if j.own[i] {
			n = ps[i].N
			elems += n * ps[i].W.Cols
		}
		j.qstart = append(j.qstart, j.qstart[i]+n)
	}
	q, nq := (*quantTasks)(j), j.qstart[len(ps)]
	if nq > 1 && elems >= parallelQuantizeElems {
		b.Parallel(nq, q)
	} else {
		for i := range nq {
			q.Run(i)
		}
	}
	b.Parallel(tasks, j)
	j.ps = nil
}

// parallelQuantizeElems is the number of activation elements from which a
// batch quantizes its inputs in parallel: four tokens of the model width.
const parallelQuantizeElems = 4 * 4096

// quantTasks is a matJob whose task i quantizes the i-th input the batch
// owns (qstart numbers them product by product).
type quantTasks matJob

// Run quantizes input i.
func (q *quantTasks) Run(i int) {
	j := (*matJob)(q)
	pi, _ := slices.BinarySearch(j.qstart, i+1)
	pi--
	j.quantize(&j.ps[pi], j.off[pi], i-j.qstart[pi])
}

// quantize quantizes input t of p into its blocks, those of input 0
// starting at off.
func (j *matJob) quantize(p *backends.Product, off, t int) {
	cols := p.W.Cols
	xs := stride(p.XStride, cols)
	switch kindOf(p.W.Type) {
	case actQ8_0:
		nb := cols / 32
		q := j.q80[off+t*nb : off+(t+1)*nb]
		quant.QuantizeQ8_0(p.X[t*xs:t*xs+cols], q)
		if j.useTile(p) {
			quant.Q8_0Sums(q, j.q80sum[off+t*nb:off+(t+1)*nb])
		}
		if j.usePre(p) {
			quant.PrepareQ8_0(q, j.q80pre[preOff(off+t*nb):preOff(off+(t+1)*nb)])
		}
	case actQ8K:
		nb := cols / quant.QK_K
		quant.QuantizeQ8K(p.X[t*xs:t*xs+cols], j.q8k[off+t*nb:off+(t+1)*nb])
	}
}

// tailX4 is the number of tokens left after the groups of four that Run
// applies to a Q2_K or IQ2_XXS row with one more four-token call, the
// unused slot repeating the last activation. One vector four-token call
// costs about two single calls (quant's BenchmarkDotx4Cached), so it pays
// for three tokens but not always for two. The pure-Go four-token kernels
// are four single calls, so they never take this path.
const tailX4 = 3

// Run computes the rows of task i for every input of its product.
func (j *matJob) Run(i int) {
	pi, _ := slices.BinarySearch(j.start, i+1)
	pi--
	p := &j.ps[pi]
	w, cols, rows := p.W, p.W.Cols, p.W.Rows
	ds := stride(p.DstStride, rows)
	off := j.off[pi]
	r0 := (i - j.start[pi]) * rowsPerTask
	r1 := min(rows, r0+rowsPerTask)
	if p.N == 1 {
		j.runOne(p, off, r0, r1)
		return
	}
	if r1-r0 == quant.Q8_0TileRows && j.useTile(p) {
		j.runTile(p, off, r0)
		return
	}
	switch w.Type {
	case quant.F16, quant.BF16, quant.F32:
		j.runFloat(p, r0, r1, &j.quads[i].f6)
		return
	}
	tail := p.N%4 == tailX4 && !j.k.Generic()
	for r := r0; r < r1; r++ {
		row := w.Data[r*w.RowBytes : (r+1)*w.RowBytes]
		// Four tokens a call share the decoding of a Q8_0, Q2_K or IQ2_XXS
		// row, and the kernels give each token the bits the single-token
		// one would, so prefill still matches decode exactly.
		t := 0
		out := &j.quads[i].v
		switch w.Type {
		case quant.Q8_0:
			// Up to eight tokens a call share the loads and the decoding
			// of each weight block (Q8_0xN); below tileMinQ8_0 tokens this
			// beats packing the rows for the tile kernel.
			nb := cols / 32
			out8 := &j.quads[i].v8
			pre := j.usePre(p)
			for ; t < p.N; t += quant.Q8_0xNMax {
				m := min(quant.Q8_0xNMax, p.N-t)
				if pre {
					j.k.Q8_0xNPre(row, j.q80pre[preOff(off+t*nb):preOff(off+(t+m)*nb)], m, out8)
				} else {
					j.k.Q8_0xN(row, j.q80[off+t*nb:off+(t+m)*nb], m, out8)
				}
				for u, v := range out8[:m] {
					p.Dst[(t+u)*ds+r] = v
				}
			}
		case quant.Q2_K, quant.IQ2_XXS:
			x4 := j.k.Q2Kx4
			if w.Type == quant.IQ2_XXS {
				x4 = j.k.IQ2XXSx4
			}
			nb := cols / quant.QK_K
			y := j.q8k[off : off+p.N*nb]
			for ; t+4 <= p.N; t += 4 {
				x4(row, y[t*nb:(t+1)*nb], y[(t+1)*nb:(t+2)*nb], y[(t+2)*nb:(t+3)*nb], y[(t+3)*nb:(t+4)*nb], out)
				for u, v := range out {
					p.Dst[(t+u)*ds+r] = v
				}
			}
			if tail {
				last := y[(t+2)*nb : (t+3)*nb]
				x4(row, y[t*nb:(t+1)*nb], y[(t+1)*nb:(t+2)*nb], last, last, out)
				for u, v := range out[:tailX4] {
					p.Dst[(t+u)*ds+r] = v
				}
				t = p.N
			}
		}
		for ; t < p.N; t++ {
			var v float32
			switch w.Type {
			case quant.Q8_0:
				nb := cols / 32
				v = j.k.Q8_0(row, j.q80[off+t*nb:off+(t+1)*nb])
			case quant.Q2_K:
				nb := cols / quant.QK_K
				v = j.k.Q2K(row, j.q8k[off+t*nb:off+(t+1)*nb])
			case quant.Q4_K:
				nb := cols / quant.QK_K
				v = j.k.Q4K(row, j.q8k[off+t*nb:off+(t+1)*nb])
			case quant.IQ2_XXS:
				nb := cols / quant.QK_K
				v = j.k.IQ2XXS(row, j.q8k[off+t*nb:off+(t+1)*nb])
			}
			p.Dst[t*ds+r] = v
		}
	}
}

// runFloat is Run for rows r0..r1 of a float-weight product of several
// inputs; out is the task's room for F16x2x3's results. Its matrices (the
// hyper-connection mixes, 24 rows of 16384, the router, the compressors'
// and the indexer's projections) have long rows and inputs of as many
// floats, so it takes the inputs in the outer loop: one input (F16: three,
// runF16x2x3, then the rest one by one) stays in cache while the task's
// rows pass over it, instead of every input coming back from L3 for every
// row.
func (j *matJob) runFloat(p *backends.Product, r0, r1 int, out *[6]float32) {
	w, cols := p.W, p.W.Cols
	xs, ds := stride(p.XStride, cols), stride(p.DstStride, w.Rows)
	dot := j.floatDot(w.Type)
	t0 := 0
	if w.Type == quant.F16 && !j.k.Generic() {
		t0 = j.runF16x2x3(p, r0, r1, out)
	}
	for t := t0; t < p.N; t++ {
		x := p.X[t*xs : t*xs+cols]
		dst := p.Dst[t*ds+r0 : t*ds+r1]
		for k := range dst {
			dst[k] = dot(w.Data[(r0+k)*w.RowBytes:(r0+k+1)*w.RowBytes], x)
		}
	}
}

// runF16x2x3 is runFloat for the inputs of an F16 product in threes, two
// rows at a time (quant.Kernels.F16x2x3, each result the single-row
// kernel's bits), and returns the number of inputs it did: each weight
// row loaded serves three inputs, which makes prefill's F16 products (the
// compressors' and the indexer's) about 1.7× faster than one row and one
// input at a time.
func (j *matJob) runF16x2x3(p *backends.Product, r0, r1 int, out *[6]float32) int {
	w, cols, rb := p.W, p.W.Cols, p.W.RowBytes
	xs, ds := stride(p.XStride, cols), stride(p.DstStride, w.Rows)
	t := 0
	for ; t+3 <= p.N; t += 3 {
		x0, x1, x2 := p.X[t*xs:t*xs+cols], p.X[(t+1)*xs:(t+1)*xs+cols], p.X[(t+2)*xs:(t+2)*xs+cols]
		r := r0
		for ; r+2 <= r1; r += 2 {
			j.k.F16x2x3(w.Data[r*rb:(r+1)*rb], w.Data[(r+1)*rb:(r+2)*rb], x0, x1, x2, out)
			for k, v := range out {
				p.Dst[(t+k%3)*ds+r+k/3] = v
			}
		}
		if r < r1 {
			wr := w.Data[r*rb : (r+1)*rb]
			p.Dst[t*ds+r] = j.k.F16(wr, x0)
			p.Dst[(t+1)*ds+r] = j.k.F16(wr, x1)
			p.Dst[(t+2)*ds+r] = j.k.F16(wr, x2)
		}
	}
	return t
}

// The tile kernels (quant.Kernels.Q8_0Tile, IQ2XXSTile, Q2KTile) apply a
// task's rows, packed once, to every input of a product with integer dot
// products sixteen rows wide. A product of a weight type runs on them,
// where the kernel set has them, from the number of inputs below: the
// smallest counts at which the tiles, pack included, beat the four-token
// kernels in cache (quant's BenchmarkQ8_0Tile, BenchmarkIQ2XXSTile and
// BenchmarkQ2KTile; the ratios are in docs/performance.md#tile-kernels). A
// product of one input is decode's and stays on the row kernels (runOne).
// Below tileMinQ8_0 a Q8_0 product runs Q8_0xN, one call per row for all
// its inputs: with rows streaming from memory, as in a batched decode
// step, it beats the tiles at two and three inputs and loses from four on
// (quant's BenchmarkQ8_0xNStream), the pack's pass over the rows no longer
// paying for itself below that. Where the set has Q8_0xNPre, it takes the
// Q8_0 products of preMinQ8_0 to preMaxQ8_0 inputs from both (usePre).
const (
	tileMinQ8_0   = 4
	tileMinIQ2XXS = 2
	tileMinQ2K    = 2
)

// useTile reports whether the rows of p run on a tile kernel.
func (j *matJob) useTile(p *backends.Product) bool {
	switch p.W.Type {
	case quant.Q8_0:
		return p.N >= tileMinQ8_0 && j.k.Q8_0Tile != nil && !j.usePre(p)
	case quant.IQ2_XXS:
		return p.N >= tileMinIQ2XXS && j.k.IQ2XXSTile != nil
	case quant.Q2_K:
		return p.N >= tileMinQ2K && j.k.Q2KTile != nil
	}
	return false
}

// usePre reports whether the rows of p run on Q8_0xNPre: a Q8_0 product
// of preMinQ8_0 to preMaxQ8_0 inputs whose rows are whole groups of
// prepared blocks, where the kernel set has the kernel. With rows
// streaming from memory, as in a batched decode step, it beats Q8_0xN and
// the tiles at every count it takes (quant's BenchmarkQ8_0xNStream,
// BenchmarkMatMulQ8_0Decode); a product of more inputs, prefill's, runs
// on the tiles, whose pack is then repaid many times over.
func (j *matJob) usePre(p *backends.Product) bool {
	return p.W.Type == quant.Q8_0 && p.N >= preMinQ8_0 && p.N <= preMaxQ8_0 &&
		j.k.Q8_0xNPre != nil && p.W.Cols%(32*quant.Q8_0PreGroup) == 0
}

// The input counts of a Q8_0 product that run on Q8_0xNPre (usePre).
const (
	preMinQ8_0 = 2
	preMaxQ8_0 = quant.Q8_0xNMax
)

// preOff returns the offset in matJob.q80pre of the prepared block that
// is block b of q80, b a multiple of quant.Q8_0PreGroup.
func preOff(b int) int { return b * (quant.Q8_0PreBytes(quant.Q8_0PreGroup) / quant.Q8_0PreGroup) }

// tileScratch is one task's packed rows and results for a tile kernel.
type tileScratch struct {
	tile []byte
	out  []float32
}

// runTile is Run for the quant.Q8_0TileRows rows from r0 of a product
// that useTile sends to a tile kernel. It gives, per row and input, the
// bits of the kernel set's row kernel, which decode runs.
func (j *matJob) runTile(p *backends.Product, off, r0 int) {
	w := p.W
	rows := w.Data[r0*w.RowBytes : (r0+quant.Q8_0TileRows)*w.RowBytes]
	// The pack reads its 16 rows as 16 interleaved streams, which the
	// hardware prefetchers follow poorly, so a pack streaming from memory
	// runs several times slower than on rows in cache. A worker's next task
	// is usually the next 16 rows (its range is contiguous), so the pack
	// asks for them while it packs these (Kernels' next), which spreads the
	// requests better than one burst before the pack.
	var next []byte
	if r1 := r0 + 2*quant.Q8_0TileRows; r1 <= w.Rows {
		next = w.Data[(r0+quant.Q8_0TileRows)*w.RowBytes : r1*w.RowBytes]
	}
	sc := j.tiles.Get().(*tileScratch)
	sc.out = grow(sc.out, p.N*quant.Q8_0TileRows)
	switch w.Type {
	case quant.Q8_0:
		nb := w.Cols / 32
		sc.tile = grow(sc.tile, quant.Q8_0TileBytes(nb))
		j.k.PackQ8_0Tile(sc.tile, rows, w.RowBytes, next)
		j.k.Q8_0Tile(sc.tile, j.q80[off:off+p.N*nb], j.q80sum[off:off+p.N*nb], p.N, sc.out)
	case quant.IQ2_XXS:
		nb := w.Cols / quant.QK_K
		sc.tile = grow(sc.tile, quant.IQ2XXSTileBytes(nb))
		j.k.PackIQ2XXSTile(sc.tile, rows, w.RowBytes, next)
		j.k.IQ2XXSTile(sc.tile, j.q8k[off:off+p.N*nb], p.N, sc.out)
	case quant.Q2_K:
		nb := w.Cols / quant.QK_K
		sc.tile = grow(sc.tile, quant.Q2KTileBytes(nb))
		j.k.PackQ2KTile(sc.tile, rows, w.RowBytes, next)
		j.k.Q2KTile(sc.tile, j.q8k[off:off+p.N*nb], p.N, sc.out)
	}
	scatterTile(p.Dst[r0:], stride(p.DstStride, w.Rows), sc.out, p.N)
	j.tiles.Put(sc)
}

// runOne is Run for a product of one input, the decode case: the kernel
// and the input are chosen once per task and each row is a kernel call
// and a store, which matters at decode's hundreds of thousands of rows a
// step. It gives the bits of the general loop.
func (j *matJob) runOne(p *backends.Product, off, r0, r1 int) {
	w := p.W
	rb := w.RowBytes
	data := w.Data[r0*rb : r1*rb]
	dst := p.Dst[r0:r1]
	switch w.Type {
	case quant.Q8_0:
		x := j.q80[off : off+w.Cols/32]
		dot := j.k.Q8_0
		for k := range dst {
			dst[k] = dot(data[k*rb:(k+1)*rb], x)
		}
	case quant.Q2_K, quant.Q4_K, quant.IQ2_XXS:
		y := j.q8k[off : off+w.Cols/quant.QK_K]
		dot := j.k.Q2K
		switch w.Type {
		case quant.Q4_K:
			dot = j.k.Q4K
		case quant.IQ2_XXS:
			dot = j.k.IQ2XXS
		}
		for k := range dst {
			dst[k] = dot(data[k*rb:(k+1)*rb], y)
		}
	default:
		x := p.X[:w.Cols]
		dot := j.floatDot(w.Type)
		for k := range dst {
			dst[k] = dot(data[k*rb:(k+1)*rb], x)
		}
	}
}

// floatDot returns the dot kernel of float-weight type t: F16, F32 or
// BF16.
func (j *matJob) floatDot(t quant.Type) func([]byte, []float32) float32 {
	switch t {
	case quant.F16:
		return j.k.F16
	case quant.F32:
		return j.k.F32
	}
	return DotBF16
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
