//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// expKernels is one vector form of expfs and the SwiGLU, in blocks of 16
// floats. exp sets n floats at dst to expf of those at src (n > 0; a
// multiple of 16 unless masked); swiglu does blocks up to the first one
// holding a NaN, or (unless masked) to the last full one, and returns how
// many floats it did. Masked forms do a short last block themselves.
type expKernels struct {
	name   string
	masked bool
	exp    func(dst, src *float32, n int)
	swiglu func(dst, gate, up *float32, n int, clamp, weight float32) int
}

// expAVX512 and expAVX2 are the kernels of exp_amd64.s. Both repeat the
// FMA path of math.Exp, which math takes when the CPU has AVX and FMA.
var (
	expAVX512 = expKernels{"avx512", true, expfsAVX512, swigluAVX512}
	expAVX2   = expKernels{"avx2", false, expfsAVX2, swigluAVX2}
)

// expLevels returns the vector forms this CPU can run, best first.
func expLevels() []expKernels {
	var ks []expKernels
	if !cpu.X86.HasAVX || !cpu.X86.HasFMA {
		return nil
	}
	if cpu.X86.HasAVX512F {
		ks = append(ks, expAVX512)
	}
	if cpu.X86.HasAVX2 {
		ks = append(ks, expAVX2)
	}
	return ks
}

// expBest is the first of expLevels, or nil where there is none.
var expBest = func() *expKernels {
	if ks := expLevels(); len(ks) > 0 {
		return &ks[0]
	}
	return nil
}()

// expfs sets dst[i] to expf(src[i]) for every i of dst, bit for bit; dst
// may be src itself (but no other overlap).
func expfs(dst, src []float32) {
	if expBest == nil {
		expfsGo(dst, src)
		return
	}
	expfsWith(expBest, dst, src)
}

// expfsWith is expfs with the kernels of k.
func expfsWith(k *expKernels, dst, src []float32) {
	src = src[:len(dst)]
	n := len(dst)
	if !k.masked {
		n &^= 15
		expfsGo(dst[n:], src[n:])
	}
	if n > 0 {
		k.exp(&dst[0], &src[0], n)
	}
}

// swiglu is Backend.SwiGLU, bit for bit: the vector kernel does blocks of
// 16 floats and hands a block holding a NaN, whose payload the scalar
// code's operand order decides, and a short last block where the kernel
// has no masked form, to swigluGo (all blocks, when the clamp or the
// weight is NaN).
func swiglu(dst, g, u []float32, clamp, weight float32) {
	if expBest == nil || clamp != clamp || weight != weight {
		swigluGo(dst, g, u, clamp, weight)
		return
	}
	swigluWith(expBest, dst, g, u, clamp, weight)
}

// swigluWith is swiglu with the kernels of k, for a clamp and weight that
// are not NaN.
func swigluWith(k *expKernels, dst, g, u []float32, clamp, weight float32) {
	g, u = g[:len(dst)], u[:len(dst)]
	for i := 0; i < len(dst); {
		i += k.swiglu(&dst[i], &g[i], &u[i], len(dst)-i, clamp, weight)
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
