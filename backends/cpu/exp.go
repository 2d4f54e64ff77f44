package cpu

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
