//go:build !amd64 || purego

package cpu

// expfs sets dst[i] to expf(src[i]) for every i of dst; dst may be src
// itself (but no other overlap).
func expfs(dst, src []float32) { expfsGo(dst, src) }

// swiglu is Backend.SwiGLU.
func swiglu(dst, g, u []float32, clamp, weight float32) { swigluGo(dst, g, u, clamp, weight) }
