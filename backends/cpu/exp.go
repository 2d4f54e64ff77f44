package cpu

// expKernels is one vector form of expfs and the SwiGLU, in blocks of 16
// floats, or (exp and swiglu nil) the Go loops. exp sets n floats at dst
// to expf of those at src (n > 0; a multiple of 16 unless masked); swiglu
// does blocks up to the first one holding a NaN, or (unless masked) to the
// last full one, and returns how many floats it did. Masked forms do a
// short last block themselves.
type expKernels struct {
	name   string
	masked bool
	exp    func(dst, src *float32, n int)
	swiglu func(dst, gate, up *float32, n int, clamp, weight float32) int
}

// expfs sets dst[i] to expf(src[i]) for every i of dst, bit for bit; dst
// may be src itself (but no other overlap).
func expfs(dst, src []float32) { expfsWith(&hostLoops.exp, dst, src) }

// expfsWith is expfs with the kernels of k.
func expfsWith(k *expKernels, dst, src []float32) {
	if k.exp == nil {
		expfsGo(dst, src)
		return
	}
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

// swiglu is Backend.SwiGLU, bit for bit.
func swiglu(dst, g, u []float32, clamp, weight float32) {
	swigluWith(&hostLoops.exp, dst, g, u, clamp, weight)
}

// swigluWith is swiglu with the kernels of k: the vector kernel does
// blocks of 16 floats and hands a block holding a NaN, whose payload the
// scalar code's operand order decides, and a short last block where the
// kernel has no masked form, to swigluGo (all blocks, when the clamp or
// the weight is NaN).
func swigluWith(k *expKernels, dst, g, u []float32, clamp, weight float32) {
	if k.swiglu == nil || clamp != clamp || weight != weight {
		swigluGo(dst, g, u, clamp, weight)
		return
	}
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

// expfsGo is expfs as a plain loop of expf.
func expfsGo(dst, src []float32) {
	src = src[:len(dst)]
	for i, x := range src {
		dst[i] = expf(x)
	}
}

// swigluGo is the SwiGLU of Backend.SwiGLU as a plain loop: g clamped
// above and u on both sides by clamp, SiLU(g)·u rounded, times weight.
func swigluGo(dst, g, u []float32, clamp, weight float32) {
	for j := range dst {
		gj := min(g[j], clamp)
		uj := min(max(u[j], -clamp), clamp)
		dst[j] = float32(SiLU(gj)*uj) * weight
	}
}
