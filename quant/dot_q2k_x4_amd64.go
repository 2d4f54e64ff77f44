//go:build amd64 && !purego

package quant

// dotQ2Kx4AVX2 is DotQ2Kx4 with AVX2: each weight block's 2-bit codes and
// scales are decoded once and applied to all four activations, and each
// token gets exactly dotQ2KAVX2's bits (dot_q2k_x4_amd64.s).
func dotQ2Kx4AVX2(w []byte, y0, y1, y2, y3 []BlockQ8K, out *[4]float32) {
	checkQ8Kx4(len(y0), y1, y2, y3)
	if len(y0) == 0 {
		*out = [4]float32{}
		return
	}
	w = w[:len(y0)*dotQ2KBytes]
	dotQ2Kx4Asm(&w[0], &y0[0], &y1[0], &y2[0], &y3[0], len(y0), out)
}

// dotQ2Kx4Asm sets out[t] to the Q2_K dot of nb weight blocks at w with nb
// activation blocks at yt (nb > 0), for t = 0..3.
//
//go:noescape
func dotQ2Kx4Asm(w *byte, y0, y1, y2, y3 *BlockQ8K, nb int, out *[4]float32)
