//go:build amd64 && !purego

package cpu

// expAVX512 and expAVX2 are the kernels of exp_amd64.s. Both repeat the
// FMA path of math.Exp, which math takes when the CPU has AVX and FMA.
var (
	expAVX512 = expKernels{"avx512", true, expfsAVX512, swigluAVX512}
	expAVX2   = expKernels{"avx2", false, expfsAVX2, swigluAVX2}
)

// expfsAVX512 sets the n floats at dst to expf of those at src (n > 0).
//
//go:noescape
func expfsAVX512(dst, src *float32, n int)

// swigluAVX512 does the SwiGLU of the n floats at gate and up into dst up to
// the first 16-float block holding a NaN and returns how many it did.
//
//go:noescape
func swigluAVX512(dst, gate, up *float32, n int, clamp, weight float32) int

// expfsAVX2 sets the n floats at dst to expf of those at src (n > 0, a
// multiple of 16).
//
//go:noescape
func expfsAVX2(dst, src *float32, n int)

// swigluAVX2 does the SwiGLU of the n floats at gate and up into dst in
// blocks of 16, up to the first block holding a NaN or the last full
// one, and returns how many it did.
//
//go:noescape
func swigluAVX2(dst, gate, up *float32, n int, clamp, weight float32) int
