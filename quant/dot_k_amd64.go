//go:build amd64 && !purego

package quant

// The AVX2 kernels of dot_k_amd64.s form each block's integer sums with
// SIMD and then combine them with the block's float scales in scalar
// float32, in the order of the pure-Go kernels of dot.go, so they return
// bit for bit the same result. The Go wrappers slice the weight row as the
// reference does, so a short row panics the same way, and pass the
// assembly plain pointers and a block count; the assembly takes the
// BlockQ8K field offsets and the block sizes from go_asm.h.

// dotQ2KAVX2 is DotQ2K with AVX2, for activations of any codes, -128
// included, and any Bsums, which it uses as stored.
func dotQ2KAVX2(w []byte, y []BlockQ8K) float32 {
	if len(y) == 0 {
		return 0
	}
	w = w[:len(y)*dotQ2KBytes]
	return dotQ2KAsm(&w[0], &y[0], len(y))
}

// dotQ4KAVX2 is DotQ4K with AVX2, for activations of any codes, -128
// included, and any Bsums, which it uses as stored.
func dotQ4KAVX2(w []byte, y []BlockQ8K) float32 {
	if len(y) == 0 {
		return 0
	}
	w = w[:len(y)*dotQ4KBytes]
	return dotQ4KAsm(&w[0], &y[0], len(y))
}

// dotIQ2XXSAVX2 is DotIQ2XXS with AVX2, for activation codes in -127..127
// where a block's scale D is nonzero, as QuantizeQ8K makes them.
func dotIQ2XXSAVX2(w []byte, y []BlockQ8K) float32 {
	if len(y) == 0 {
		return 0
	}
	w = w[:len(y)*dotIQ2XXSBytes]
	return dotIQ2XXSAsm(&w[0], &y[0], len(y))
}

// dotIQ2XXSx4AVX2 is DotIQ2XXSx4 with AVX2, for the activations
// dotIQ2XXSAVX2 takes: each weight block is expanded once and applied to
// all four activations.
func dotIQ2XXSx4AVX2(w []byte, y0, y1, y2, y3 []BlockQ8K, out *[4]float32) {
	checkQ8Kx4(len(y0), y1, y2, y3)
	if len(y0) == 0 {
		*out = [4]float32{}
		return
	}
	w = w[:len(y0)*dotIQ2XXSBytes]
	dotIQ2XXSx4Asm(&w[0], &y0[0], &y1[0], &y2[0], &y3[0], len(y0), out)
}

// dotQ2KAsm returns the Q2_K dot of nb weight blocks at w with nb
// activation blocks at y (nb > 0).
//
//go:noescape
func dotQ2KAsm(w *byte, y *BlockQ8K, nb int) float32

// dotQ4KAsm returns the Q4_K dot of nb weight blocks at w with nb
// activation blocks at y (nb > 0).
//
//go:noescape
func dotQ4KAsm(w *byte, y *BlockQ8K, nb int) float32

// dotIQ2XXSAsm returns the IQ2_XXS dot of nb weight blocks at w with nb
// activation blocks at y (nb > 0).
//
//go:noescape
func dotIQ2XXSAsm(w *byte, y *BlockQ8K, nb int) float32

// dotIQ2XXSx4Asm sets out[t] to the IQ2_XXS dot of nb weight blocks at w
// with nb activation blocks at yt (nb > 0), for t = 0..3.
//
//go:noescape
func dotIQ2XXSx4Asm(w *byte, y0, y1, y2, y3 *BlockQ8K, nb int, out *[4]float32)
