package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ds4-go/ds4/backends"
	"github.com/ds4-go/ds4/quant"
)

// matTypes are the weight types the backend's matrix products support.
var matTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q2_K, quant.Q4_K, quant.IQ2_XXS}

// testMatrix quantizes a random rows×cols matrix (experts stacked) to t
// with quant.Quantize (IQ2_XXS with an all-ones importance vector).
func testMatrix(t testing.TB, typ quant.Type, cols, rows, experts int, seed uint64) backends.Matrix {
	t.Helper()
	r := newRand(seed)
	data := randVec(r, cols*rows*experts, 0.5)
	var imp []float32
	if typ == quant.IQ2_XXS {
		imp = make([]float32, cols)
		for i := range imp {
			imp[i] = 1
		}
	}
	raw, err := quant.Quantize(typ, data, cols, imp)
	require.NoError(t, err)
	dims := []uint64{uint64(cols), uint64(rows)}
	if experts > 1 {
		dims = append(dims, uint64(experts))
	}
	m, err := backends.NewMatrix(fmt.Sprintf("w.%v", typ), typ, dims, raw)
	require.NoError(t, err)
	return m
}

// refDot is the reference row dot of package quant for w's type, with the
// activation quantized as the spec prescribes (docs/formats/model.md#matrix-vector-products); BF16 is a
// sequential float32 sum written out here.
func refDot(typ quant.Type, row []byte, x []float32) float32 {
	switch typ {
	case quant.Q8_0:
		q := make([]quant.BlockQ8_0, len(x)/32)
		quant.QuantizeQ8_0(x, q)
		return quant.DotQ8_0(row, q)
	case quant.Q2_K, quant.Q4_K, quant.IQ2_XXS:
		q := make([]quant.BlockQ8K, len(x)/quant.QK_K)
		quant.QuantizeQ8K(x, q)
		switch typ {
		case quant.Q2_K:
			return quant.DotQ2K(row, q)
		case quant.Q4_K:
			return quant.DotQ4K(row, q)
		}
		return quant.DotIQ2XXS(row, q)
	case quant.F16:
		return quant.DotF16(row, x)
	case quant.F32:
		return quant.DotF32(row, x)
	case quant.BF16:
		var s float32
		for i, v := range x {
			w := math.Float32frombits(uint32(binary.LittleEndian.Uint16(row[2*i:])) << 16)
			s += float32(w * v)
		}
		return s
	}
	panic("no reference for " + typ.String())
}

// actStep returns, per element of x, half the quantization step of the
// activation quantization the type takes (0 for float weights): Q8_0 blocks
// of 32 have step amax/127, Q8_K blocks of 256 step max|x|/127.
func actStep(typ quant.Type, x []float32) []float64 {
	step := make([]float64, len(x))
	block := 0
	switch typ {
	case quant.Q8_0:
		block = 32
	case quant.Q2_K, quant.Q4_K, quant.IQ2_XXS:
		block = quant.QK_K
	default:
		return step
	}
	for b := 0; b < len(x); b += block {
		var amax float64
		for _, v := range x[b : b+block] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		for i := b; i < b+block; i++ {
			// Half a step, plus slack for the rounded reciprocal scale.
			step[i] = amax / 127 * 0.5001
		}
	}
	return step
}

func TestMatVec(t *testing.T) {
	// The pure-Go kernels, which refDot reproduces bit for bit; quant's
	// kernels_test.go holds the vector kernels to them.
	be := NewWithKernels(3, quant.GenericKernels())
	defer be.Close()
	for _, typ := range matTypes {
		for _, shape := range []struct{ cols, rows int }{{256, 1}, {512, 37}, {768, 16}, {256, 33}} {
			t.Run(fmt.Sprintf("%v_%dx%d", typ, shape.rows, shape.cols), func(t *testing.T) {
				w := testMatrix(t, typ, shape.cols, shape.rows, 1, uint64(typ)*1000+uint64(shape.rows))
				r := newRand(uint64(shape.cols))
				x := randVec(r, shape.cols, 1)
				xCopy := append([]float32(nil), x...)
				dst := make([]float32, shape.rows+1)
				dst[shape.rows] = 12345 // sentinel past the end
				be.MatVec(dst[:shape.rows], w, x)
				require.Equal(t, xCopy, x, "input modified")
				require.Equal(t, float32(12345), dst[shape.rows])

				step := actStep(typ, x)
				wd := make([]float32, shape.cols)
				for row := range shape.rows {
					rb := w.Data[row*w.RowBytes : (row+1)*w.RowBytes]
					// Bit-exact: the backend must use quant's kernels.
					want := refDot(typ, rb, x)
					require.Equal(t, math.Float32bits(want), math.Float32bits(dst[row]), "row %d: %v vs %v", row, want, dst[row])

					// Against the exact dot of the dequantized weights, within
					// the activation-quantization error Σ|w_i|·step_i plus
					// float32 accumulation noise.
					require.NoError(t, quant.DequantizeRow(typ, rb, wd))
					var exact, mag, actErr, maxW float64
					for i, wi := range wd {
						exact += float64(wi) * float64(x[i])
						mag += math.Abs(float64(wi) * float64(x[i]))
						actErr += math.Abs(float64(wi)) * step[i]
						maxW = math.Max(maxW, math.Abs(float64(wi)))
					}
					var sumX float64
					for _, v := range x {
						sumX += math.Abs(float64(v))
					}
					noise := float64(shape.cols+8) * 0x1p-24 * (mag + actErr)
					if typ == quant.Q2_K || typ == quant.Q4_K {
						// d·sc·q − dmin·m dequantizes with a cancellation.
						noise += 1e-5 * maxW * sumX
					}
					if typ == quant.F32 {
						noise = 0x1p-23*math.Abs(exact) + 1e-12*mag
					}
					require.InDelta(t, exact, float64(dst[row]), actErr+noise, "row %d", row)
				}
			})
		}
	}
}

func TestMatMulEqualsMatVecs(t *testing.T) {
	// Three inputs take the four-token kernels' tail and F16's
	// three-input kernel once; five take it and then two inputs alone.
	type run struct {
		typ quant.Type
		n   int
	}
	var runs []run
	for _, typ := range matTypes {
		runs = append(runs, run{typ, 3})
		if typ == quant.F16 {
			runs = append(runs, run{typ, 5})
		}
	}
	for _, tc := range runs {
		typ, n := tc.typ, tc.n
		t.Run(fmt.Sprintf("%s/n=%d", typ, n), func(t *testing.T) {
			const cols, rows = 512, 37
			w := testMatrix(t, typ, cols, rows, 1, uint64(typ)+7)
			x := randVec(newRand(8), n*cols, 1)
			// One input with a much larger scale so quantized blocks differ.
			for i := cols; i < 2*cols; i++ {
				x[i] *= 100
			}
			var outs [][]float32
			for _, workers := range []int{1, 2, 3, 0} {
				be := New(workers)
				got := make([]float32, n*rows)
				be.MatMul(got, w, x, n)
				for k := range n {
					one := make([]float32, rows)
					be.MatVec(one, w, x[k*cols:(k+1)*cols])
					require.Equal(t, bitsOf(one), bitsOf(got[k*rows:(k+1)*rows]), "workers=%d input %d", workers, k)
				}
				be.Close()
				outs = append(outs, got)
			}
			// Determinism: bit-identical for every worker count.
			for i := 1; i < len(outs); i++ {
				require.Equal(t, bitsOf(outs[0]), bitsOf(outs[i]), "worker config %d", i)
			}
		})
	}
}

func bitsOf(v []float32) []uint32 {
	b := make([]uint32, len(v))
	for i, f := range v {
		b[i] = math.Float32bits(f)
	}
	return b
}

func TestMatVecWorkersDeterministic(t *testing.T) {
	// Row counts around the task size (16) and not divisible by it.
	for _, rows := range []int{1, 15, 16, 17, 37, 100, 257} {
		w := testMatrix(t, quant.Q8_0, 256, rows, 1, uint64(rows))
		x := randVec(newRand(9), 256, 1)
		b1, b3 := New(1), New(3)
		d1, d3 := make([]float32, rows), make([]float32, rows)
		b1.MatVec(d1, w, x)
		b3.MatVec(d3, w, x)
		b1.Close()
		b3.Close()
		require.Equal(t, bitsOf(d1), bitsOf(d3), "rows=%d", rows)
		// The pure-Go kernels reproduce refDot bit for bit; the vector
		// Q8_0 kernel sums in lanes and is held to it in quant's tests.
		g := NewWithKernels(3, quant.GenericKernels())
		g.MatVec(d3, w, x)
		g.Close()
		for r := range rows {
			rb := w.Data[r*w.RowBytes : (r+1)*w.RowBytes]
			require.Equal(t, refDot(quant.Q8_0, rb, x), d3[r], "rows=%d row %d", rows, r)
		}
	}
}

func TestMatVecExpertAndRowRange(t *testing.T) {
	be := New(2)
	defer be.Close()
	const cols, rows, experts = 256, 20, 3
	w := testMatrix(t, quant.IQ2_XXS, cols, rows, experts, 77)
	x := randVec(newRand(10), cols, 1)
	for e := range experts {
		got := make([]float32, rows)
		be.MatVec(got, w.Expert(e), x)
		for r := range rows {
			off := (e*rows + r) * w.RowBytes
			require.Equal(t, refDot(quant.IQ2_XXS, w.Data[off:off+w.RowBytes], x), got[r], "expert %d row %d", e, r)
		}
	}
	plain := testMatrix(t, quant.Q4_K, cols, 40, 1, 78)
	full := make([]float32, 40)
	be.MatVec(full, plain, x)
	part := make([]float32, 23)
	be.MatVec(part, plain.RowRange(5, 28), x)
	require.Equal(t, full[5:28], part)
}

func TestMatMulConcurrentCallers(t *testing.T) {
	// Several goroutines sharing one backend get the same answers as a
	// sequential run (pooled scratch must not leak between calls).
	be := New(3)
	defer be.Close()
	const cols, rows = 512, 50
	ws := []backends.Matrix{
		testMatrix(t, quant.Q8_0, cols, rows, 1, 1),
		testMatrix(t, quant.Q2_K, cols, rows, 1, 2),
		testMatrix(t, quant.F16, cols, rows, 1, 3),
	}
	xs := [][]float32{randVec(newRand(1), 2*cols, 1), randVec(newRand(2), 2*cols, 3)}
	want := map[[2]int][]float32{}
	for i, w := range ws {
		for k, x := range xs {
			d := make([]float32, 2*rows)
			be.MatMul(d, w, x, 2)
			want[[2]int{i, k}] = d
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range 20 {
				i, k := (g+it)%len(ws), (g*it)%len(xs)
				d := make([]float32, 2*rows)
				be.MatMul(d, ws[i], xs[k], 2)
				for j := range d {
					if d[j] != want[[2]int{i, k}][j] {
						errs <- fmt.Sprintf("goroutine %d: matrix %d input %d differs at %d", g, i, k, j)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestMatVecUnsupportedTypePanics(t *testing.T) {
	be := New(1)
	defer be.Close()
	q40 := quant.Type(2) // Q4_0: a known ggml type the backend does not multiply
	m := backends.Matrix{Type: q40, Cols: 32, Rows: 1, Experts: 1, RowBytes: 18, Data: make([]byte, 18)}
	require.Panics(t, func() { be.MatVec(make([]float32, 1), m, make([]float32, 32)) })
	k := backends.Matrix{Type: quant.Q8_K, Cols: 256, Rows: 1, Experts: 1, RowBytes: 292, Data: make([]byte, 292)}
	require.Panics(t, func() { be.MatVec(make([]float32, 1), k, make([]float32, 256)) })
}

func TestMatVecZeroInput(t *testing.T) {
	// An all-zero activation quantizes to d = 0 and gives exact zeros.
	be := New(2)
	defer be.Close()
	for _, typ := range matTypes {
		w := testMatrix(t, typ, 256, 20, 1, 5)
		dst := make([]float32, 20)
		for i := range dst {
			dst[i] = 1
		}
		be.MatVec(dst, w, make([]float32, 256))
		require.Equal(t, make([]float32, 20), dst, "%v", typ)
	}
}

// --- Parallel / Close ---

func TestParallelVisitsEachIndexOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 7} {
		be := New(workers)
		require.Equal(t, workers, be.Workers())
		for _, n := range []int{0, 1, 5, 27, 28, 29, 1000} {
			counts := make([]atomic.Int32, n)
			be.Parallel(n, backends.TaskFunc(func(i int) { counts[i].Add(1) }))
			for i := range counts {
				require.Equal(t, int32(1), counts[i].Load(), "workers=%d n=%d index %d", workers, n, i)
			}
		}
		be.Parallel(-3, backends.TaskFunc(func(int) { t.Error("called for n < 0") }))
		closeWithin(t, be, 5*time.Second)
	}
}

func TestParallelUsesWorkers(t *testing.T) {
	// With 4 workers, 4 pieces that each wait for all the others can only
	// finish if they really run concurrently.
	be := New(4)
	defer be.Close()
	var arrived atomic.Int32
	release := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	go func() {
		be.Parallel(4, backends.TaskFunc(func(int) {
			if arrived.Add(1) == 4 {
				once.Do(func() { close(release) })
			}
			<-release
		}))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		n := arrived.Load()
		once.Do(func() { close(release) }) // unblock the pieces so Close can return
		t.Fatalf("only %d of 4 pieces ran concurrently", n)
	}
}

func TestParallelStealsFromStalledWorker(t *testing.T) {
	// Piece 0, the first of one worker's range, waits until every other
	// piece has run: only a worker that steals the rest of that range can
	// get there.
	const n = 100
	be := New(2)
	defer be.Close()
	var done atomic.Int32
	stalled := atomic.Bool{}
	be.Parallel(n, backends.TaskFunc(func(i int) {
		if i != 0 {
			done.Add(1)
			return
		}
		for deadline := time.Now().Add(10 * time.Second); done.Load() < n-1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				stalled.Store(true)
				return
			}
		}
	}))
	require.False(t, stalled.Load(), "%d of %d pieces ran while piece 0 stalled: no steal", done.Load(), n-1)
}

func TestParallelTooManyPieces(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("an int cannot count 2^32 pieces")
	}
	be := New(2)
	defer be.Close()
	n := uint64(1) << 32
	require.PanicsWithValue(t, "cpu: Parallel of 4294967296 pieces, more than a range holds",
		func() { be.Parallel(int(n), backends.TaskFunc(func(int) {})) })
}

func TestParallelConcurrentCallers(t *testing.T) {
	be := New(3)
	defer be.Close()
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 200 {
				counts := make([]atomic.Int32, n)
				be.Parallel(n, backends.TaskFunc(func(i int) { counts[i].Add(1) }))
				for i := range counts {
					if counts[i].Load() != 1 {
						bad.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, bad.Load())
}

func TestNewDefaultWorkers(t *testing.T) {
	be := New(0)
	require.Equal(t, runtime.GOMAXPROCS(0), be.Workers())
	closeWithin(t, be, 5*time.Second)
	be = New(-2)
	require.Equal(t, runtime.GOMAXPROCS(0), be.Workers())
	closeWithin(t, be, 5*time.Second)
}

func TestCloseStopsWorkers(t *testing.T) {
	before := runtime.NumGoroutine()
	be := New(8)
	be.Parallel(100, backends.TaskFunc(func(int) {}))
	closeWithin(t, be, 5*time.Second)
	// Close waits for the helpers, so they are gone once it returns (the
	// watcher goroutine of closeWithin may need a moment to exit).
	// (require.Eventually would add goroutines of its own to the count.)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}

func closeWithin(t *testing.T, be *Backend, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { be.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal("Close did not return")
	}
}

// --- DotBF16 ---

func TestDotBF16(t *testing.T) {
	r := newRand(31)
	for _, n := range []int{0, 1, 7, 256, 4096} {
		x := randVec(r, n, 1)
		wf := randVec(r, n, 2)
		row := make([]byte, 2*n+6) // trailing bytes are ignored
		var exact, mag float64
		var seq float32
		for i, v := range wf {
			// Truncate to bfloat16 by hand (round toward zero is fine here:
			// the test only needs a known bf16 value per element).
			h := uint16(math.Float32bits(v) >> 16)
			binary.LittleEndian.PutUint16(row[2*i:], h)
			wv := math.Float32frombits(uint32(h) << 16)
			exact += float64(wv) * float64(x[i])
			mag += math.Abs(float64(wv) * float64(x[i]))
			seq += float32(wv * x[i])
		}
		got := DotBF16(row, x)
		require.InDelta(t, exact, float64(got), float64(n+1)*0x1p-24*mag, "n=%d", n)
		require.Equal(t, seq, got, "n=%d sequential float32 order", n)
	}
	// Exact small case: bf16 1.5, −2, 0.25 against 2, 3, 4 = 3 − 6 + 1.
	row := []byte{0xC0, 0x3F, 0x00, 0xC0, 0x80, 0x3E}
	require.Equal(t, float32(-2), DotBF16(row, []float32{2, 3, 4}))
}

// TestParallelCallerHelps checks the calling goroutine takes queued parts
// too instead of waiting for the helpers: with two workers, two queued
// parts must be able to run at the same time. Every part after the
// caller's own first one waits until two are running at once; if only the
// helper ran queued parts that would never happen.
func TestParallelCallerHelps(t *testing.T) {
	be := New(2)
	defer be.Close()
	var running atomic.Int32
	gate := make(chan struct{})
	var once sync.Once
	stuck := atomic.Bool{}
	be.Parallel(8, backends.TaskFunc(func(i int) {
		if i == 0 {
			return
		}
		if running.Add(1) >= 2 {
			once.Do(func() { close(gate) })
		}
		select {
		case <-gate:
		case <-time.After(10 * time.Second):
			stuck.Store(true)
			once.Do(func() { close(gate) })
		}
	}))
	require.False(t, stuck.Load(), "queued parts never ran concurrently: the caller does not help")
}
