// Package backends defines the compute interface the DS4 engine runs on;
// implementations live in sub-packages (backends/cpu first).
package backends

import (
	"fmt"

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

// Backend runs the engine's numeric kernels. All vectors are host float32
// slices; matrices are bound from the model file. Implementations must be
// deterministic: the same inputs give bit-identical outputs whatever the
// degree of parallelism, so decode and prefill agree exactly.
type Backend interface {
	// MatVec sets dst[r] = row r of w · x for every row of the plain matrix w.
	// Quantized weights take the activation quantization upstream ds4 uses
	// (Q8_0 for Q8_0 weights, Q8_K for K/IQ quants); float weights use x as is.
	MatVec(dst []float32, w Matrix, x []float32)
	// MatMul applies MatVec to n inputs stored back to back in x (n·Cols),
	// writing n·Rows outputs; each output equals what MatVec computes.
	MatMul(dst []float32, w Matrix, x []float32, n int)
	// Parallel runs t.Run(i) for i in [0, n) on the backend's workers and
	// waits.
	Parallel(n int, t Task)
	// Close releases the backend's workers.
	Close()
}

// Task is work split into independent indexed pieces.
type Task interface {
	Run(i int)
}

// TaskFunc adapts a function to a Task.
type TaskFunc func(i int)

// Run calls f(i).
func (f TaskFunc) Run(i int) { f(i) }
