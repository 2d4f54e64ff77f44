// Package backends defines the compute interface the DS4 engine runs on;
// implementations live in sub-packages (backends/cpu first).
package backends

import (
	"fmt"
	"math"

	"github.com/ds4-go/ds4/quant"
)

// Matrix is a weight matrix (or a stack of expert matrices) bound in place
// from the model file: Rows rows of Cols elements of Type, row r of expert e
// at byte (e·Rows + r)·RowBytes of Data.
type Matrix struct {
	Name     string
	Type     quant.Type
	Cols     int // ne[0], the input width
	Rows     int // ne[1], the output width of one expert
	Experts  int // ne[2], 1 for plain matrices
	RowBytes int
	Data     []byte
}

// NewMatrix binds data as a matrix with the given GGUF dims (ne order).
func NewMatrix(name string, t quant.Type, dims []uint64, data []byte) (Matrix, error) {
	if len(dims) < 1 || len(dims) > 3 {
		return Matrix{}, fmt.Errorf("matrix %s: %d dims, want 1..3", name, len(dims))
	}
	m := Matrix{Name: name, Type: t, Cols: int(dims[0]), Rows: 1, Experts: 1, Data: data}
	if len(dims) > 1 {
		m.Rows = int(dims[1])
	}
	if len(dims) > 2 {
		m.Experts = int(dims[2])
	}
	rb, err := t.RowBytes(m.Cols)
	if err != nil {
		return Matrix{}, fmt.Errorf("matrix %s: %w", name, err)
	}
	m.RowBytes = rb
	if want := rb * m.Rows * m.Experts; len(data) != want {
		return Matrix{}, fmt.Errorf("matrix %s: %d bytes, want %d", name, len(data), want)
	}
	return m, nil
}

// Expert returns the matrix of expert e of a stacked tensor.
func (m Matrix) Expert(e int) Matrix {
	n := m.Rows * m.RowBytes
	out := m
	out.Experts = 1
	out.Data = m.Data[e*n : (e+1)*n : (e+1)*n]
	return out
}

// RowRange returns the rows [lo, hi) of a plain matrix as a matrix.
func (m Matrix) RowRange(lo, hi int) Matrix {
	out := m
	out.Rows = hi - lo
	out.Data = m.Data[lo*m.RowBytes : hi*m.RowBytes : hi*m.RowBytes]
	return out
}

// Backend runs the engine's numeric kernels: the operations of
// docs/formats/model.md that touch every element of an activation, a weight or a
// cache row. All vectors are host float32 slices; matrices are bound from
// the model file. Implementations must be deterministic: the same inputs
// give bit-identical outputs whatever the degree of parallelism, so decode
// and prefill agree exactly. Vectors passed to one call do not overlap
// unless a method says so.
type Backend interface {
	// MatVec sets dst[r] = row r of w · x for every row of the plain matrix w.
	// Quantized weights take the activation quantization upstream ds4 uses
	// (Q8_0 for Q8_0 weights, Q8_K for K/IQ quants); float weights use x as is.
	MatVec(dst []float32, w Matrix, x []float32)
	// MatMul applies MatVec to n inputs stored back to back in x (n·Cols),
	// writing n·Rows outputs; each output equals what MatVec computes.
	MatMul(dst []float32, w Matrix, x []float32, n int)
	// MatMulBatch computes every product of ps, each output equal to what
	// MatMul computes, in one parallel pass over all their rows. Products
	// that read the same inputs (the same X, N and XStride) and quantize
	// them alike share one quantization. No output may overlap another or
	// any input.
	MatMulBatch(ps []Product)

	// RMSNorm sets dst = x·w/sqrt(mean(x²)+eps) (w nil: no weight); dst may be x.
	RMSNorm(dst, x, w []float32, eps float32)
	// RMSNormHeads sets each of the len(x)/dim rows of x to its RMSNorm
	// (no weight), as RMSNorm(row, row, nil, eps) would.
	RMSNormHeads(x []float32, dim int, eps float32)
	// RoPE rotates the adjacent pairs of tail for position pos (by −θ when
	// inverse).
	RoPE(tail []float32, pos int, r RoPE, inverse bool)
	// RoPEHeads is RoPE of the r.Dims floats from off of each of the
	// len(x)/stride rows of x, all at position pos.
	RoPEHeads(x []float32, stride, off, pos int, r RoPE, inverse bool)
	// FP8Sim rounds x through E4M3FN in blocks of 64 with power-of-two scales.
	FP8Sim(x []float32)
	// QAT applies the normalized Hadamard transform and rounds through E2M1
	// in blocks of 32 (the indexer's quantization-aware path).
	QAT(x []float32)
	// RoundF16 rounds x to binary16 precision.
	RoundF16(x []float32)

	// HCPre splits the hyper-connection projection mix (2n+n² values) of
	// state x (n streams) into the sublayer input in = Σ pre[h]·x[h], the
	// post weights and the Sinkhorn-normalized mixing matrix comb (n×n).
	HCPre(in, post, comb, x, mix []float32, hc HC)
	// HCPost sets dst[a] = y·post[a] + Σ_b comb[a+n·b]·x[b] for n streams.
	HCPost(dst, x, y, post, comb []float32, n int)
	// HCHead collapses the n streams of x into out with the output head's
	// weights sigmoid(mix[h]·scale + base[h]) + eps.
	HCHead(out, x, mix, scale, base []float32, eps float32)

	// Attend computes, per head, the softmax over rows (keys = values) of
	// q_h·row·scale with the head's sink logit in the denominator, and
	// writes the weighted sum of rows to out.
	Attend(out, q []float32, rows [][]float32, sinks []float32, scale float32)
	// CompressPool pools a compressor window per dimension with a softmax
	// over the window's scores (docs/formats/model.md#compressor): ratio 4 mixes the previous window
	// (slots 0..3, first half) and the current one (slots 4..7, second
	// half); other ratios pool their ratio slots. Slots are w wide; out
	// gets d values.
	CompressPool(out, kv, score []float32, ratio, w int)
	// IndexerScores sets scores[c] = Σ_h max(0, rows[c]·q_h)·weights[h]
	// for each compressed indexer row c.
	IndexerScores(scores, rows, q, weights []float32, dim int)
	// TopK marks the k largest scores in mask, the lowest index first on ties.
	TopK(mask []bool, scores []float32, k int)

	// RouterProbs sets prob = sqrt(softplus(logits)).
	RouterProbs(prob, logits []float32)
	// SelectExperts fills sel with the experts of the largest prob+bias
	// (bias may be nil), in descending order, ties to the lower id.
	SelectExperts(sel []int, prob, bias []float32)
	// SwiGLU sets dst = silu(min(g, clamp))·clamp(u, ±clamp)·weight.
	SwiGLU(dst, g, u []float32, clamp, weight float32)
	// Add sets dst = a + b elementwise; dst may alias a or b.
	Add(dst, a, b []float32)

	// Parallel runs t.Run(i) for i in [0, n) on the backend's workers and
	// waits.
	Parallel(n int, t Task)
	// Close releases the backend's workers.
	Close()
}

// Product is one matrix product of a MatMulBatch: N inputs of W.Cols floats,
// input t at X[t·XStride:], each giving W.Rows outputs at Dst[t·DstStride:];
// a zero stride means back to back (W.Cols for X, W.Rows for Dst).
type Product struct {
	Dst                []float32
	W                  Matrix
	X                  []float32
	N                  int
	XStride, DstStride int
}

// HC holds a hyper-connection sublayer's constants: its scale (3 values),
// base (2n+n²), stream count, Sinkhorn iterations and epsilon.
type HC struct {
	Scale, Base []float32
	N, Iters    int
	Eps         float32
}

// RoPE holds the rotary-embedding constants of one layer.
type RoPE struct {
	Dims      int     // rotated tail width
	ThetaStep float32 // base^(-2/Dims)
	FreqScale float32 // 1 without YaRN, 1/factor with it
	YaRN      bool
	Lo, Hi    float32 // YaRN correction range (pair indices)
}

// NewRoPE computes the constants for a tail of dims entries with the given
// base, and with YaRN (factor, original context, betas) when yarn is set,
// in float32 as the reference does.
func NewRoPE(dims int, base float32, yarn bool, factor float32, origCtx int, betaFast, betaSlow float32) RoPE {
	f32 := func(x float64) float32 { return float32(x) }
	r := RoPE{Dims: dims, ThetaStep: f32(math.Pow(float64(base), float64(-2/float32(dims)))), FreqScale: 1, YaRN: yarn}
	if !yarn {
		return r
	}
	r.FreqScale = 1 / factor
	logf := func(x float32) float32 { return f32(math.Log(float64(x))) }
	cd := func(beta float32) float32 {
		return float32(dims) * logf(float32(origCtx)/(beta*2*math.Pi)) / (2 * logf(base))
	}
	r.Lo = max(0, f32(math.Floor(float64(cd(betaFast)))))
	r.Hi = min(float32(dims-1), f32(math.Ceil(float64(cd(betaSlow)))))
	return r
}

// Task is work split into independent indexed pieces.
type Task interface {
	Run(i int)
}

// TaskFunc adapts a function to a Task.
type TaskFunc func(i int)

// Run calls f(i).
func (f TaskFunc) Run(i int) { f(i) }
