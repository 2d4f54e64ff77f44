package cpu

import (
	"github.com/ds4-go/ds4/internal/cpufeat"
	"github.com/ds4-go/ds4/quant"
)

// vecOps are the float32 loops of attention. The generic ones are Dot and
// Axpy, the sequential float32 order of docs/formats/model.md#attend; the SIMD ones sum in
// fixed vector lanes, so they are as deterministic, and round differently
// only in the last bits.
type vecOps struct {
	name string // "go" for Dot and Axpy, else the instruction set
	dot  func(a, b []float32) float32
	axpy func(acc []float32, w float32, x []float32)
	// dots4 and weigh4, nil where there are none, are dots and weigh of
	// four heads in one pass over the rows.
	dots4  func(dst, q []float32, rows [][]float32)
	weigh4 func(out, w []float32, rows [][]float32, r []float32)
}

// dots sets dst[g·j+h] = dot(q_h, rows[j]) for every row j and each of the
// g heads q_h of q (len(q)/g floats apiece).
func (v vecOps) dots(dst, q []float32, g int, rows [][]float32) {
	if g == 4 && v.dots4 != nil {
		v.dots4(dst, q, rows)
		return
	}
	d := len(q) / g
	for j, row := range rows {
		for h := range g {
			dst[g*j+h] = v.dot(q[h*d:(h+1)*d], row)
		}
	}
}

// weigh sets each of the g heads out_h of out (len(out)/g floats apiece)
// to r[h]·Σ_j w[g·j+h]·rows[j]: the sum taken from zero by axpy in row
// order, then every element multiplied by r[h].
func (v vecOps) weigh(out, w []float32, g int, rows [][]float32, r []float32) {
	if g == 4 && v.weigh4 != nil {
		v.weigh4(out, w, rows, r)
		return
	}
	clear(out)
	d := len(out) / g
	for h := range g {
		oh := out[h*d : (h+1)*d]
		for j, row := range rows {
			v.axpy(oh, w[g*j+h], row)
		}
		scaleVec(oh, r[h])
	}
}

// scaleVec multiplies every element of x by r.
func scaleVec(x []float32, r float32) {
	for k := range x {
		x[k] *= r
	}
}

// genericVecOps returns Dot and Axpy.
func genericVecOps() vecOps { return vecOps{name: goName, dot: Dot, axpy: Axpy} }

// vecOpsFor returns the SIMD loops of this CPU's level when the dot
// kernels k are vector ones, else the generic ones: a backend built on the
// pure-Go dot kernels (as DS4_PUREGO gives New) runs pure Go throughout,
// and one built on a vector set runs the loops that set's CPU has.
func vecOpsFor(k quant.Kernels) vecOps {
	if k.Generic() {
		return genericVecOps()
	}
	return loopsFor(cpufeat.Host().CPULevel()).vec
}
