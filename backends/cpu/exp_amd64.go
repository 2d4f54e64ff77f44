//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// hasExpAVX512 reports whether the AVX-512 exp of exp_amd64.s can run and
// matches math.Exp: it repeats the FMA path of math.Exp, which math takes
// when the CPU has AVX and FMA.
var hasExpAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX && cpu.X86.HasFMA

// expfs sets dst[i] to expf(src[i]) for every i of dst, bit for bit; dst
// may be src itself (but no other overlap).
func expfs(dst, src []float32) {
	if !hasExpAVX512 {
		expfsGo(dst, src)
		return
	}
	src = src[:len(dst)]
	if len(dst) > 0 {
		expfsAVX512(&dst[0], &src[0], len(dst))
	}
}

// swiglu is Backend.SwiGLU, bit for bit: the vector kernel does blocks of
// 16 floats and hands a block holding a NaN, whose payload the scalar
// code's operand order decides, to swigluGo (all blocks, when the clamp
// or the weight is NaN).
func swiglu(dst, g, u []float32, clamp, weight float32) {
	if !hasExpAVX512 || clamp != clamp || weight != weight {
		swigluGo(dst, g, u, clamp, weight)
		return
	}
	g, u = g[:len(dst)], u[:len(dst)]
	for i := 0; i < len(dst); {
		i += swigluAVX512(&dst[i], &g[i], &u[i], len(dst)-i, clamp, weight)
		if i < len(dst) {
			end := min(i+16, len(dst))
			swigluGo(dst[i:end], g[i:end], u[i:end], clamp, weight)
			i = end
		}
	}
}

// expfsAVX512 sets the n floats at dst to expf of those at src (n > 0).
//
//go:noescape
func expfsAVX512(dst, src *float32, n int)

// swigluAVX512 does the SwiGLU of the n floats at gate and up into dst up to
// the first 16-float block holding a NaN and returns how many it did.
//
//go:noescape
func swigluAVX512(dst, gate, up *float32, n int, clamp, weight float32) int
