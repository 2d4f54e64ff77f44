//go:build !amd64 || purego

package cpu

import (
	"math"
	"math/rand/v2"
)

// referenceVecOps returns the loops that define the float order of be's
// attention: Dot and Axpy, the only ones of this build.
func referenceVecOps(*Backend) vecOps { return genericVecOps() }

// oddVec returns n values, each with probability p an infinity or a NaN
// and otherwise normal, subnormal or near the float32 maximum.
func oddVec(r *rand.Rand, n int, p float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch {
		case r.Float64() < p:
			v[i] = float32([]float64{math.Inf(1), math.Inf(-1), math.NaN()}[r.IntN(3)])
		default:
			v[i] = float32(r.NormFloat64() * []float64{1, 1e-42, 1e37}[r.IntN(3)])
		}
	}
	return v
}
