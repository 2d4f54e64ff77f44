//go:build amd64 && !purego

package quant

// The AVX-512 Q2_K kernels of dot_q2k_avx512_amd64.s multiply each 2-bit
// code by its 4-bit sub-block scale in a byte (a table lookup), so that one
// VNNI VPDPBUSD per 64 elements gives DotQ2K's isum with no int16 stage;
// the min term uses the activation's 16-element sums. They form each
// block's exact int32 sums and then do its float32 arithmetic in dot.go's
// order, so they return bit for bit what DotQ2K and the AVX2 kernels
// return. They need AVX512F/BW/VL, VBMI (VPERMB) and VNNI.

// dotQ2KAVX512 is DotQ2K with AVX-512 (BW, VBMI, VNNI), for activations
// of any codes, -128 included, and any Bsums, which it uses as stored.
func dotQ2KAVX512(w []byte, y []BlockQ8K) float32 {
	if len(y) == 0 {
		return 0
	}
	w = w[:len(y)*dotQ2KBytes]
	return dotQ2KAVX512Asm(&w[0], &y[0], len(y))
}

// dotQ2Kx4AVX512 is DotQ2Kx4 with AVX-512: each weight block is expanded
// once and applied to all four activations.
func dotQ2Kx4AVX512(w []byte, y0, y1, y2, y3 []BlockQ8K, out *[4]float32) {
	checkQ8Kx4(len(y0), y1, y2, y3)
	if len(y0) == 0 {
		*out = [4]float32{}
		return
	}
	w = w[:len(y0)*dotQ2KBytes]
	dotQ2Kx4AVX512Asm(&w[0], &y0[0], &y1[0], &y2[0], &y3[0], len(y0), out)
}

// dotQ2KAVX512Asm returns the Q2_K dot of nb weight blocks at w with nb
// activation blocks at y (nb > 0).
//
//go:noescape
func dotQ2KAVX512Asm(w *byte, y *BlockQ8K, nb int) float32

// dotQ2Kx4AVX512Asm sets out[t] to the Q2_K dot of nb weight blocks at w
// with nb activation blocks at yt (nb > 0), for t = 0..3.
//
//go:noescape
func dotQ2Kx4AVX512Asm(w *byte, y0, y1, y2, y3 *BlockQ8K, nb int, out *[4]float32)
