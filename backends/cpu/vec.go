package cpu

import "github.com/ds4-go/ds4/quant"

// vecOps are the float32 loops of attention. The generic ones are Dot and
// Axpy, the sequential float32 order of spec §6.1; the SIMD ones sum in
// fixed vector lanes, so they are as deterministic, and round differently
// only in the last bits.
type vecOps struct {
	dot  func(a, b []float32) float32
	axpy func(acc []float32, w float32, x []float32)
}

// genericVecOps returns Dot and Axpy.
func genericVecOps() vecOps { return vecOps{dot: Dot, axpy: Axpy} }

// vecOpsFor returns the SIMD loops when the dot kernels k are vector ones
// and this CPU has SIMD loops, else the generic ones: a backend built on
// the pure-Go dot kernels runs pure Go throughout.
func vecOpsFor(k quant.Kernels) vecOps {
	if !k.Generic() {
		if v, ok := simdVecOps(); ok {
			return v
		}
	}
	return genericVecOps()
}
